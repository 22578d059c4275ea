"""Independent verifier of a campaign bundle. Imports only the standard library, on purpose.

It recomputes every file's size and sha256 against ``manifest.json``, refuses files the manifest does
not name, checks ``latest.json`` when it points at this bundle, and recomputes the exported receipt
chain. Usable as ``python -m baton.campaign.verify DIR`` or ``baton campaign verify DIR``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

GENESIS = "0" * 64


def _canonical(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_bundle(run_dir: Path) -> list[str]:
    """Every mismatch found, first one first; an empty list means the bundle verifies."""
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
    problems += _verify_receipt_chain(run_dir / "receipts_chain.json")
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


def _verify_receipt_chain(path: Path) -> list[str]:
    if not path.is_file():
        return []
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return ["receipts_chain.json: unreadable"]
    previous, expected_seq = GENESIS, 1
    for row in rows:
        body = {key: row.get(key) for key in ("seq", "kind", "at", "payload", "prev_sha256")}
        if row.get("seq") != expected_seq:
            return [f"receipts_chain.json: expected seq {expected_seq}, found {row.get('seq')}"]
        if row.get("prev_sha256") != previous:
            return [f"receipts_chain.json: seq {expected_seq} does not link to its predecessor"]
        if hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest() != row.get("sha256"):
            return [f"receipts_chain.json: seq {expected_seq} hash does not match its content"]
        previous, expected_seq = row["sha256"], expected_seq + 1
    return []


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the bundle verifies, 1 naming the first mismatch otherwise."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m baton.campaign.verify DIR\n")
        return 2
    problems = verify_bundle(Path(args[0]))
    if problems:
        sys.stderr.write(f"campaign_bundle_invalid: {problems[0]}\n")
        for extra in problems[1:]:
            sys.stderr.write(f"  also: {extra}\n")
        return 1
    sys.stdout.write(f"ok: {args[0]} verifies\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
