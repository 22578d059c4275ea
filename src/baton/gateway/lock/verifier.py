"""Independent bundle verifier: recomputes every hash from the files and checks the lock receipt chain.

This module imports only the standard library (a test enforces it), so it shares no code, and no
bug, with the lock that wrote the bundle. Its canonical JSON is the same definition as
``baton.evidence.receipts.canonical_json`` (SPEC.md section 4), re-implemented here on purpose. Run it
alone with ``python -m baton.gateway.lock.verifier BUNDLE_DIR [--policy FILE] [--lock-receipt-sha256 HEX]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tomllib
import uuid
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

VERIFIER_RECEIPT_SCHEMA_VERSION = "baton_gateway_verifier_receipt_v1"
LOCK_RECEIPT_SCHEMA_VERSION = "baton_gateway_lock_receipt_v1"
BUNDLE_SCHEMA_VERSION = "baton_gateway_bundle_v1"
MAX_JSON_BYTES = 16 * 1024 * 1024
PACKAGE_FIELDS = (
    "ecosystem",
    "name",
    "version",
    "tarball_path",
    "tarball_sha512_hex",
    "tarball_sha256_hex",
    "size",
)


class VerificationError(Exception):
    """A check failed; the message is the error class."""


def canonical_json(value: Any) -> str:
    """json.dumps(ensure_ascii=False, sort_keys=True, separators=(",", ":")), as SPEC.md defines it."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_json(path: Path, error_class: str) -> tuple[bytes, dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except OSError:
        raise VerificationError(error_class) from None
    if not raw or len(raw) > MAX_JSON_BYTES:
        raise VerificationError(error_class)
    try:
        value = json.loads(raw)
    except ValueError:
        raise VerificationError(error_class) from None
    if not isinstance(value, dict):
        raise VerificationError(error_class)
    return raw, value


def _package_rows(value: Any, error_class: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise VerificationError(error_class)
    rows = []
    for row in value:
        if not isinstance(row, dict) or any(field not in row for field in PACKAGE_FIELDS):
            raise VerificationError(error_class)
        rows.append({field: row[field] for field in PACKAGE_FIELDS})
    return rows


def _check_tarball(bundle: Path, row: dict[str, Any]) -> dict[str, Any]:
    relative = PurePosixPath(str(row["tarball_path"]))
    if (
        relative.is_absolute()
        or ".." in relative.parts
        or relative.parts[:1] != ("tarballs",)
        or len(relative.parts) != 2
    ):
        raise VerificationError("artifact_bundle_invalid")
    path = bundle / relative
    try:
        data = path.read_bytes()
    except OSError:
        raise VerificationError("artifact_tarball_unreadable") from None
    sha512 = hashlib.sha512(data).hexdigest()
    if (
        sha512 != row["tarball_sha512_hex"]
        or _sha256(data) != row["tarball_sha256_hex"]
        or len(data) != row["size"]
    ):
        raise VerificationError("artifact_tarball_checksum_mismatch")
    return {"key": f"{row['name']}@{row['version']}", "tarball_sha512_hex": sha512, "status": "passed"}


def _check_sbom(sbom: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if sbom.get("bomFormat") != "CycloneDX" or sbom.get("specVersion") != "1.5":
        raise VerificationError("artifact_bundle_sbom_contract_invalid")
    components = sbom.get("components")
    if not isinstance(components, list):
        raise VerificationError("artifact_bundle_sbom_contract_invalid")
    observed = set()
    for component in components:
        if not isinstance(component, dict):
            raise VerificationError("artifact_bundle_sbom_contract_invalid")
        name = (
            f"{component['group']}/{component['name']}" if component.get("group") else component.get("name")
        )
        hashes = {
            h.get("alg"): h.get("content") for h in component.get("hashes") or [] if isinstance(h, dict)
        }
        observed.add((name, component.get("version"), hashes.get("SHA-512"), hashes.get("SHA-256")))
    expected = {(r["name"], r["version"], r["tarball_sha512_hex"], r["tarball_sha256_hex"]) for r in rows}
    if observed != expected or len(components) != len(rows):
        raise VerificationError("artifact_bundle_sbom_contract_invalid")


def _check_policy(
    policy_file: Path, lock: dict[str, Any], rows: list[dict[str, Any]], files: dict[str, str]
) -> None:
    try:
        policy = tomllib.loads(policy_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        raise VerificationError("adapter_policy_invalid") from None
    artifacts = policy.get("artifacts")
    if not isinstance(artifacts, list) or not all(isinstance(a, dict) for a in artifacts):
        raise VerificationError("adapter_policy_invalid")
    ordered = sorted(artifacts, key=lambda a: (a.get("ecosystem", ""), a.get("name", "")))
    if _sha256(canonical_json(ordered).encode("utf-8")) != lock.get("artifact_set_sha256"):
        raise VerificationError("artifact_receipt_chain_invalid")
    pinned = {(a.get("ecosystem"), a.get("name"), a.get("version"), a.get("sha512")) for a in artifacts}
    bundled = {(r["ecosystem"], r["name"], r["version"], r["tarball_sha512_hex"]) for r in rows}
    if pinned != bundled:
        raise VerificationError("artifact_bundle_package_set_mismatch")
    found = policy.get("resolution")
    resolution: dict[str, Any] = found if isinstance(found, dict) else {}
    for field, name in (
        ("npm_lockfile_sha256", "package-lock.json"),
        ("pypi_requirements_sha256", "requirements.txt"),
    ):
        if resolution.get(field) != files.get(name):
            raise VerificationError("artifact_receipt_chain_invalid")


RESOLUTION_FILES = ("package-lock.json", "requirements.txt")


def _sri_hex(integrity: str, algorithm: str) -> str | None:
    import base64
    import binascii

    for token in str(integrity).split():
        name, _, digest = token.partition("-")
        if name == algorithm:
            try:
                return base64.b64decode(digest, validate=True).hex()
            except (ValueError, binascii.Error):
                raise VerificationError("artifact_bundle_invalid") from None
    return None


def _check_lockfile(bundle: Path, data: bytes, rows: list[dict[str, Any]], skipped: list[str]) -> None:
    """Every package the npm lockfile installs is a bundled tarball whose bytes match its integrity."""
    try:
        packages = json.loads(data).get("packages")
    except (ValueError, AttributeError):
        raise VerificationError("artifact_bundle_invalid") from None
    if not isinstance(packages, dict):
        raise VerificationError("artifact_bundle_invalid")
    by_key = {(r["name"], r["version"]): r for r in rows if r["ecosystem"] == "npm"}
    used = set()
    for path, entry in packages.items():
        if path == "" or path in skipped or not isinstance(entry, dict) or entry.get("inBundle"):
            continue
        name = entry.get("name") or str(path).rsplit("node_modules/", 1)[-1]
        row = by_key.get((name, entry.get("version")))
        if row is None:
            raise VerificationError("artifact_bundle_package_set_mismatch")
        sha512 = _sri_hex(entry.get("integrity", ""), "sha512")
        if sha512 is not None:
            if sha512 != row["tarball_sha512_hex"]:
                raise VerificationError("artifact_tarball_checksum_mismatch")
        else:
            sha1 = _sri_hex(entry.get("integrity", ""), "sha1")
            content = (bundle / row["tarball_path"]).read_bytes()
            if sha1 is None or hashlib.sha1(content, usedforsecurity=False).hexdigest() != sha1:
                raise VerificationError("artifact_tarball_checksum_mismatch")
        used.add((row["name"], row["version"]))
    if used != set(by_key):
        raise VerificationError("artifact_bundle_package_set_mismatch")


def _check_requirements(data: bytes, rows: list[dict[str, Any]]) -> None:
    """The requirements pin exactly the bundled wheels, each by its sha256."""
    import re

    pinned = set()
    for line in data.decode("utf-8", "replace").splitlines():
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+) --hash=sha256:([0-9a-f]{64})", line.strip())
        if not match:
            raise VerificationError("artifact_bundle_invalid")
        pinned.add(match.groups())
    bundled = {(r["name"], r["version"], r["tarball_sha256_hex"]) for r in rows if r["ecosystem"] == "pypi"}
    if pinned != bundled:
        raise VerificationError("artifact_bundle_package_set_mismatch")


def _check_resolution(
    bundle: Path, manifest: dict[str, Any], lock: dict[str, Any], rows: list[dict[str, Any]]
) -> dict[str, str]:
    """The resolver's output files hash as recorded and agree with the bundled packages."""
    resolution = manifest.get("resolution") or {}
    files = resolution.get("files") if isinstance(resolution, dict) else None
    files = files or {}
    if not isinstance(files, dict) or files != (lock.get("resolution_files") or {}):
        raise VerificationError("artifact_bundle_invalid")
    for name, digest in files.items():
        if name not in RESOLUTION_FILES:
            raise VerificationError("artifact_bundle_invalid")
        try:
            data = (bundle / name).read_bytes()
        except OSError:
            raise VerificationError("artifact_bundle_invalid") from None
        if _sha256(data) != digest:
            raise VerificationError("artifact_tarball_checksum_mismatch")
        if name == "package-lock.json":
            skipped = resolution.get("skipped_optional") or []
            _check_lockfile(bundle, data, rows, skipped if isinstance(skipped, list) else [])
        else:
            _check_requirements(data, rows)
    return dict(files)


def _verify(bundle: Path, policy_file: Path | None, expected_lock_sha256: str | None) -> dict[str, Any]:
    lock_raw, lock = _read_json(bundle / "lock-receipt.json", "artifact_bundle_invalid")
    lock_sha = _sha256(lock_raw)
    if expected_lock_sha256 is not None and lock_sha != expected_lock_sha256:
        raise VerificationError("artifact_receipt_chain_invalid")
    if (
        lock.get("schema_version") != LOCK_RECEIPT_SCHEMA_VERSION
        or lock.get("promotion_allowed") is not False
    ):
        raise VerificationError("artifact_bundle_invalid")
    manifest_raw, manifest = _read_json(bundle / "bundle-manifest.json", "artifact_bundle_invalid")
    if _sha256(manifest_raw) != lock.get("bundle_manifest_sha256"):
        raise VerificationError("artifact_bundle_manifest_checksum_mismatch")
    sbom_raw, sbom = _read_json(bundle / "sbom.cdx.json", "artifact_bundle_invalid")
    if _sha256(sbom_raw) != lock.get("cyclonedx_sbom_sha256"):
        raise VerificationError("artifact_bundle_sbom_checksum_mismatch")
    rows = _package_rows(manifest.get("packages"), "artifact_bundle_invalid")
    if (
        manifest.get("schema_version") != BUNDLE_SCHEMA_VERSION
        or manifest.get("adapter_id") != lock.get("adapter_id")
        or manifest.get("artifact_set_sha256") != lock.get("artifact_set_sha256")
        or manifest.get("package_count") != len(rows)
    ):
        raise VerificationError("artifact_bundle_invalid")
    if rows != _package_rows(lock.get("packages"), "artifact_bundle_invalid"):
        raise VerificationError("artifact_bundle_package_set_mismatch")
    checked = [_check_tarball(bundle, row) for row in rows]
    _check_sbom(sbom, rows)
    files = _check_resolution(bundle, manifest, lock, rows)
    if policy_file is not None:
        _check_policy(policy_file, lock, rows, files)
    return {
        "adapter_id": lock.get("adapter_id"),
        "lock_run_id": lock.get("run_id"),
        "lock_receipt_sha256": lock_sha,
        "bundle_manifest_sha256": lock["bundle_manifest_sha256"],
        "cyclonedx_sbom_sha256": lock["cyclonedx_sbom_sha256"],
        "artifact_set_sha256": lock.get("artifact_set_sha256"),
        "packages": checked,
        "resolution_files": files,
    }


def recheck_bundle(
    bundle: Path, *, policy_file: Path | None = None, expected_lock_sha256: str | None = None
) -> None:
    """Recompute every hash (as ``verify_bundle``) without writing a receipt; raises on the first failure.

    ``baton gateway check`` uses it, so a tarball tampered with after verify fails check; the
    ``VerificationError``'s message is the error class.
    """
    _verify(bundle, policy_file, expected_lock_sha256)


def verify_bundle(
    bundle: Path, *, policy_file: Path | None = None, expected_lock_sha256: str | None = None
) -> tuple[dict[str, Any], str]:
    """Verify a bundle and write ``verifier-receipt.json`` into it; returns the receipt and its sha256."""
    receipt, data = verifier_receipt(
        bundle, policy_file=policy_file, expected_lock_sha256=expected_lock_sha256
    )
    if bundle.is_dir():  # 0600 like every file baton keeps (the stdlib alone: this module imports no baton)
        fd = os.open(bundle / "verifier-receipt.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
    return receipt, _sha256(data)


def verifier_receipt(
    bundle: Path, *, policy_file: Path | None = None, expected_lock_sha256: str | None = None
) -> tuple[dict[str, Any], bytes]:
    """Verify a bundle and return the receipt and its bytes; writes nothing."""
    run_id = str(uuid.uuid4())
    base: dict[str, Any] = {
        "schema_version": VERIFIER_RECEIPT_SCHEMA_VERSION,
        "run_id": run_id,
        "observed_at": datetime.now(UTC).isoformat(),
        "promotion_allowed": False,
    }
    implementation = "standalone_stdlib_only_no_lock_import"
    try:
        result = _verify(bundle, policy_file, expected_lock_sha256)
    except VerificationError as exc:
        receipt = {**base, "status": "blocked_with_safe_next_action", "error_class": str(exc)}
        receipt["independent_post_verifier"] = {"implementation": implementation, "status": "failed"}
    else:
        receipt = {**base, **result, "status": "completed_verified"}
        receipt["independent_post_verifier"] = {"implementation": implementation, "status": "passed"}
    return receipt, canonical_json(receipt).encode("utf-8") + b"\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: print the verifier receipt (written only to ``--write-receipt PATH``); exit 1 when
    the bundle does not verify, 2 when the receipt cannot be written. Never a traceback."""
    parser = argparse.ArgumentParser(
        description="Recompute every hash of a baton gateway bundle; read-only unless --write-receipt."
    )
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--policy", type=Path)
    parser.add_argument("--lock-receipt-sha256")
    parser.add_argument("--write-receipt", type=Path, help="also write the receipt to this file")
    args = parser.parse_args(argv)
    try:
        receipt, data = verifier_receipt(
            args.bundle, policy_file=args.policy, expected_lock_sha256=args.lock_receipt_sha256
        )
    except Exception as exc:  # an unforeseen input: a typed answer, never a traceback
        sys.stdout.write(
            canonical_json({"status": "failed", "error_class": "internal_error", "error": type(exc).__name__})
            + "\n"
        )
        return 1
    sys.stdout.write(data.decode("utf-8"))
    if args.write_receipt is not None:
        try:
            args.write_receipt.write_bytes(data)
        except OSError as exc:
            sys.stderr.write(f"verifier_receipt_not_written: {args.write_receipt}: {exc.strerror or exc}\n")
            return 2
    return 0 if receipt["status"] == "completed_verified" else 1


if __name__ == "__main__":
    raise SystemExit(main())
