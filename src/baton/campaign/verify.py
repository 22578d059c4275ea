"""Independent verifier of a campaign bundle. Imports only the standard library, on purpose.

It recomputes every file's size and sha256 against ``manifest.json``, refuses files the manifest does
not name, checks ``latest.json`` when it points at this bundle, and recomputes the exported receipt
chain with its signed checkpoints (through ``baton.chain_verify``, itself standard library only: Ed25519
through ``cryptography`` when importable, else a pure-Python RFC 8032 verifier, so signatures are always
checked). Usable as ``python -m baton.campaign.verify DIR`` or ``baton campaign verify DIR``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from baton.chain_verify import dict_rows, parse_strict, public_key_id, read_public_key, verify_rows


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_bundle(run_dir: Path, public_key: bytes | None = None) -> list[str]:
    """Every mismatch found, first one first; an empty list means the bundle verifies.

    The chain's signed checkpoints are checked with ``public_key`` when given (a copy you trust, e.g. the
    server's ``keys/checkpoint.pub``), else with the key the bundle names, which proves only that the
    bundle is consistent with itself.
    """
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing"]
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {entry["path"]: entry for entry in manifest["files"]}
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{manifest_path}: unreadable ({type(exc).__name__})"]
    problems: list[str] = []
    for relative, entry in sorted(listed.items()):
        path = run_dir / relative
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            problems.append(f"{relative}: path escapes the bundle")
        elif not path.is_file():
            problems.append(f"{relative}: listed in the manifest but missing")
        elif path.stat().st_size != entry.get("bytes"):
            problems.append(f"{relative}: size {path.stat().st_size} != manifest {entry.get('bytes')}")
        elif _sha256_file(path) != entry.get("sha256"):
            problems.append(f"{relative}: sha256 differs from the manifest")
    for path in sorted(run_dir.rglob("*")):
        relative = path.relative_to(run_dir).as_posix()
        if path.is_file() and relative != "manifest.json" and relative not in listed:
            problems.append(f"{relative}: present but not in the manifest")
    problems += _verify_latest(run_dir, manifest_path, manifest)
    problems += _verify_receipt_chain(run_dir / "receipts_chain.json", public_key)
    return problems


def _verify_latest(run_dir: Path, manifest_path: Path, manifest: dict[str, object]) -> list[str]:
    latest_path = run_dir.parent / "latest.json"
    if not latest_path.is_file():
        return []
    try:
        latest = json.loads(latest_path.read_text(encoding="utf-8"))
    except ValueError:
        return [f"{latest_path}: unreadable"]
    if latest.get("campaign_id") != manifest.get("campaign_id"):
        return []  # latest.json names a newer campaign; nothing to check here
    problems = []
    if latest.get("manifest_sha256") != _sha256_file(manifest_path):
        problems.append("latest.json: manifest_sha256 differs from manifest.json")
    if latest.get("status") != manifest.get("status"):
        problems.append("latest.json: status differs from manifest.json")
    return problems


def _verify_receipt_chain(path: Path, public_key: bytes | None = None) -> list[str]:
    """The exported chain, and its signed checkpoints (``receipts_checkpoints.json``) when present."""
    if not path.is_file():
        return []
    try:
        rows = parse_strict(path.read_text(encoding="utf-8"))
    except ValueError:
        return ["receipts_chain.json: unreadable"]
    if not isinstance(rows, list):
        return ["receipts_chain.json: not a list of receipts"]
    anchors_path = path.with_name("receipts_checkpoints.json")
    checkpoints: list[dict[str, object]] = []
    keys: dict[str, bytes] = {}
    if anchors_path.is_file():
        try:
            anchors = parse_strict(anchors_path.read_text(encoding="utf-8"))
            checkpoints = list(anchors["checkpoints"])
            key = public_key or (bytes.fromhex(anchors["public_key"]) if anchors["public_key"] else None)
        except (ValueError, KeyError, TypeError):
            return ["receipts_checkpoints.json: unreadable"]
        keys = {public_key_id(key): key} if key else {}
    elif public_key is not None:
        return ["receipts_checkpoints.json: missing, so the chain cannot be checked against the given key"]
    report = verify_rows(dict_rows(rows), checkpoints=checkpoints, public_keys=keys)
    if not report.ok:
        return [f"receipts_chain.json: {report.error_class} at seq {report.first_bad_seq}: {report.reason}"]
    return []


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the bundle verifies, 1 naming the first mismatch otherwise."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--public-key"):
        sys.stderr.write("usage: python -m baton.campaign.verify DIR [--public-key checkpoint.pub]\n")
        return 2
    key = None
    if len(args) == 3:
        try:
            key = read_public_key(Path(args[2]))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"campaign_bundle_invalid: the public key could not be read ({exc})\n")
            return 1
    problems = verify_bundle(Path(args[0]), key)
    if problems:
        sys.stderr.write(f"campaign_bundle_invalid: {problems[0]}\n")
        for extra in problems[1:]:
            sys.stderr.write(f"  also: {extra}\n")
        return 1
    sys.stdout.write(f"ok: {args[0]} verifies\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
