"""Writing a lock's bundle on disk: tarballs, resolver output, manifest, SBOM and lock receipt.

Bundle layout (``BATON_HOME/gateway/<id>/bundle``)::

    tarballs/<file>          the packages, byte for byte as the registry served them
    bundle-manifest.json     every package with its sha512 and sha256
    sbom.cdx.json            CycloneDX 1.5
    lock-receipt.json        the hashes of all three, the link the verifier and replay check
"""

from __future__ import annotations

import hashlib
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex, utc_now
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.registries import Fetched

# the stdlib verifier defines what it reads; the writer writes exactly that
from baton.gateway.lock.verifier import BUNDLE_SCHEMA_VERSION, LOCK_RECEIPT_SCHEMA_VERSION, PACKAGE_FIELDS
from baton.store.private import private_dir, write_private

SAFE_FILENAME = re.compile(r"^[A-Za-z0-9_.+-]{1,255}$")
OPERATION_BOUNDARIES = {
    "mcp_server_started": False,
    "external_tool_call_performed": False,
    "production_write_performed": False,
    "runtime_request_or_response_body_stored": False,
}


def package_row(item: Fetched) -> dict[str, Any]:
    """The manifest row of one fetched package."""
    if not SAFE_FILENAME.fullmatch(item.filename):
        raise GatewayError("artifact_fetch_failed", f"The registry named a file {item.filename!r}.")
    return {
        "ecosystem": item.ecosystem,
        "name": item.name,
        "version": item.version,
        "tarball_path": f"tarballs/{item.filename}",
        "tarball_sha512_hex": item.sha512_hex,
        "tarball_sha256_hex": hashlib.sha256(item.content).hexdigest(),
        "size": len(item.content),
        "registry_integrity": item.registry_integrity,
        "source_url": item.source_url,
    }


def write_json(path: Path, value: Any) -> str:
    """Write canonical JSON plus a newline; returns the sha256 of the bytes written."""
    data = canonical_json(value).encode("utf-8") + b"\n"
    write_private(path, data)
    return sha256_hex(data)


def _lock_receipt(
    adapter_id: str,
    run_id: str,
    artifact_set: str,
    rows: list[dict[str, Any]],
    hashes: dict[str, str],
    resolution: dict[str, Any],
) -> dict[str, Any]:
    """The lock receipt: the hashes of the tarballs, the manifest, the SBOM and the resolver's output."""
    return {
        "schema_version": LOCK_RECEIPT_SCHEMA_VERSION,
        "run_id": run_id,
        "adapter_id": adapter_id,
        "status": "completed_locked_pending_independent_verifier",
        "observed_at": utc_now(),
        "artifact_set_sha256": artifact_set,
        "packages": [{k: r[k] for k in PACKAGE_FIELDS} for r in rows],
        "bundle_manifest_sha256": hashes["manifest"],
        "cyclonedx_sbom_sha256": hashes["sbom"],
        "resolution_files": resolution["files"],
        "interpreter": resolution.get("interpreter"),
        "replay_allowed": False,
        "promotion_allowed": False,
        **OPERATION_BOUNDARIES,
    }


def _key(item: Fetched) -> tuple[str, str, str]:
    return item.ecosystem, item.name, item.version


def write_bundle(
    directory: Path,
    adapter_id: str,
    fetched: list[Fetched],
    run_id: str,
    artifact_set: str,
    resolution: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write tarballs, resolver output, manifest, SBOM and lock receipt into a staging directory.

    The caller swaps it in with :func:`swap_bundle` only once everything else has succeeded, so a
    failed lock leaves the previous bundle as it was.
    """
    from baton.gateway.lock.sbom import build_sbom

    resolution = {"files": {}, **(resolution or {})}
    staging = directory.with_name(directory.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    private_dir(staging)  # 0700, and 0600 files: the bundle is baton's alone (it extracts copies to run)
    private_dir(staging / "tarballs")
    ordered = sorted({_key(f): f for f in fetched}.values(), key=_key)
    rows = [package_row(item) for item in ordered]
    for item, row in zip(ordered, rows, strict=True):
        write_private(staging / row["tarball_path"], item.content)
    files: dict[str, str] = {}
    for name, content in (resolution.pop("contents", None) or {}).items():
        write_private(staging / name, content)
        files[name] = hashlib.sha256(content).hexdigest()
    resolution["files"] = files
    manifest = {
        "schema_version": BUNDLE_SCHEMA_VERSION,
        "adapter_id": adapter_id,
        "artifact_set_sha256": artifact_set,
        "package_count": len(rows),
        "packages": rows,
        "resolution": resolution,
        "operation_boundaries": OPERATION_BOUNDARIES,
    }
    manifest_sha = write_json(staging / "bundle-manifest.json", manifest)
    sbom_text = build_sbom(adapter_id, rows, artifact_set, datetime.now(UTC))
    write_private(staging / "sbom.cdx.json", sbom_text.encode("utf-8"))
    hashes = {"manifest": manifest_sha, "sbom": sha256_hex(sbom_text.encode("utf-8"))}
    receipt = _lock_receipt(adapter_id, run_id, artifact_set, rows, hashes, resolution)
    receipt_sha = write_json(staging / "lock-receipt.json", receipt)
    return {**receipt, "lock_receipt_sha256": receipt_sha, "staging": staging}


def swap_bundle(staging: Path, directory: Path) -> None:
    """Replace the bundle with the staged one (the old one is removed only after the rename)."""
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    staging.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def resolution_contents(resolved: Closure) -> dict[str, bytes]:
    """The resolver's output files of a closure (lockfile, requirements) by their name in the bundle."""
    contents = {}
    if resolved.lockfile is not None:
        contents["package-lock.json"] = resolved.lockfile
    if resolved.requirements is not None:
        contents["requirements.txt"] = resolved.requirements
    return contents
