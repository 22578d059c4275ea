"""The receipt chain as SEP-3004 audit records (MCP SEP-3004, "Tamper-Evident Audit Record Contract").

A view, never the source of truth: each baton receipt becomes one record whose protected core and
``baton-receipt`` extension name the receipt (seq, kind, time, its own sha256 and link, its payload's
sha256), canonicalized and chained by the SEP's rules (sorted keys, strings NFC-normalized and trimmed of
U+0020, no control characters, no bare numbers, SHA-256 over the canonical bytes, ``previous_hash``
threading). The payload itself rides unprotected at the top level (``baton_payload``), bound through the
protected ``payload_sha256``. Stdlib only at import time: ``python -m baton.evidence.sep3004 DIR`` verifies
an export with nothing else installed. The field map is in docs/receipts.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.runtime import Runtime

CANONICAL_FORM_VERSION = "gif-audit/2"
MAX_FIELD_LEN = 8192
MAX_DEPTH = 64
CORE_PROTECTED = (
    "event_id",
    "occurred_at",
    "principal_id",
    "event_type",
    "tool_name",
    "outcome",
    "previous_hash",
)
CORE_REQUIRED = (*CORE_PROTECTED, "event_hash", "extensions")
OUTCOMES = ("allowed", "denied", "deferred", "error")
EXTENSION = "baton-receipt"
#: The SEP's registered extensions (required data fields), and baton's own, declared in the manifest.
SEP_REGISTRY: dict[str, tuple[str, ...]] = {
    "caller-governance": ("purpose_declared",),
    "runtime-security": ("drift_status", "severity", "quarantine_decision", "policy_id"),
    "admission-control": (),
}
BATON_REGISTRY = {
    **SEP_REGISTRY,
    EXTENSION: ("seq", "kind", "at", "receipt_sha256", "receipt_prev_sha256", "payload_sha256"),
}
MANIFEST_REQUIRED = (
    "storage_mechanism",
    "chain_algorithm",
    "canonical_form_version",
    "verification_procedure_ref",
)
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def normalize_string(text: str) -> str:
    """SEP-3004 section 2.3: control characters refused, NFC, U+0020 trimmed at both ends, length capped."""
    if _CONTROL.search(text):
        raise ValueError("control character in protected string field")
    normal = unicodedata.normalize("NFC", text).strip(" ")
    if len(normal.encode("utf-16-le")) // 2 > MAX_FIELD_LEN:  # the cap counts UTF-16 code units
        raise ValueError("protected string field exceeds length cap")
    return normal


def canonicalize(value: Any, depth: int = 0) -> str:
    """Sorted-key canonical JSON of a protected value (strings normalized; keys verbatim)."""
    if depth > MAX_DEPTH:
        raise ValueError("protected value nesting exceeds depth cap")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        raise ValueError("bare numbers are excluded from protected values (SEP-3004 section 2.3)")
    if isinstance(value, str):
        return json.dumps(normalize_string(value), ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonicalize(item, depth + 1) for item in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: _utf16(item[0]))
        return (
            "{"
            + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonicalize(v, depth + 1) for k, v in items)
            + "}"
        )
    raise ValueError(f"uncanonicalizable value of type {type(value).__name__}")


def _utf16(key: str) -> bytes:
    """JavaScript's default sort (UTF-16 code units), which the reference implementation uses for keys."""
    return key.encode("utf-16-be")


def preimage(record: Mapping[str, Any]) -> str:
    """The canonical protected body: the core (less ``event_hash``) and the whole ``extensions`` object."""
    body = {field: record[field] for field in (*CORE_PROTECTED, "extensions") if field in record}
    return canonicalize(body)


def event_hash(record: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical preimage, hex."""
    return hashlib.sha256(preimage(record).encode("utf-8")).hexdigest()


def skeleton_problems(record: Mapping[str, Any]) -> list[str]:
    """C-REC-1: the core fields are present with conforming types."""
    problems = [f"missing required field: {field}" for field in CORE_REQUIRED if field not in record]
    if "outcome" in record and not isinstance(record["outcome"], str):
        problems.append("outcome MUST be string")
    for field in ("tool_name", "previous_hash"):
        if field in record and record[field] is not None and not isinstance(record[field], str):
            problems.append(f"{field} MUST be string or null")
    if "extensions" in record and not isinstance(record["extensions"], Mapping):
        problems.append("extensions MUST be a keyed object")
    return problems


def extension_problems(
    record: Mapping[str, Any], registry: Mapping[str, Iterable[str]] = SEP_REGISTRY
) -> list[str]:
    """C-REC-1: at least one extension, every one registered, each with its required fields (non-null)."""
    extensions = record.get("extensions") or {}
    problems = [] if extensions else ["extensions MUST declare at least one registered type"]
    for kind, data in extensions.items():
        if kind not in registry:
            problems.append(f"unregistered extension type: {kind}")
            continue
        fields = data if isinstance(data, Mapping) else {}
        problems += [f"extension {kind} requires {f}" for f in registry[kind] if fields.get(f) is None]
    return problems


def hash_problems(record: Mapping[str, Any]) -> list[str]:
    """C-REC-3: ``event_hash`` is the hash of the canonical preimage (a canonicalization failure is one too)."""
    try:
        expected = event_hash(record)
    except ValueError as exc:
        return [f"canonicalization failed on {record.get('event_id')}: {exc}"]
    if expected != record.get("event_hash"):
        return [f"event_hash mismatch on {record.get('event_id')}"]
    return []


def segment_problems(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """C-REC-4 (section 2.6): every record's hash, and ``previous_hash`` threading from a null head."""
    problems: list[str] = []
    prior: Mapping[str, Any] | None = None
    for record in records:
        problems += hash_problems(record)
        expected = None if prior is None else prior.get("event_hash")
        if record.get("previous_hash") != expected:
            problems.append(
                f"broken link at {record.get('event_id')}: previous_hash is not the prior event_hash"
            )
        prior = record
    return problems


def manifest_problems(manifest: Mapping[str, Any]) -> list[str]:
    """C-REC-7: the attestation manifest declares each required field as a non-empty string."""
    return [
        f"attestation manifest missing or empty: {field}"
        for field in MANIFEST_REQUIRED
        if not isinstance(manifest.get(field), str) or not manifest[field].strip()
    ]


def emission_problems(records: Iterable[Mapping[str, Any]], required: Iterable[str]) -> list[str]:
    """C-REC-5: each required ``event_type`` was recorded, and linked to a session (caller-governance)."""
    by_type = {str(r.get("event_type")): r for r in records}
    problems = []
    for event_type in required:
        found = by_type.get(event_type)
        if found is None:
            problems.append(f"missing required event_type: {event_type}")
        elif ((found.get("extensions") or {}).get("caller-governance") or {}).get("session_id") is None:
            problems.append(f"{event_type} not linked to a session_id")
    return problems


def occurred_at(at: str) -> str:
    """A receipt's ISO 8601 time as the SEP's RFC 3339 UTC with milliseconds and a literal ``Z``."""
    moment = datetime.fromisoformat(at).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def outcome(payload: Mapping[str, Any]) -> str:
    """The SEP's abstract disposition of a receipt (docs/receipts.md has the rule)."""
    decision = str(payload.get("decision") or payload.get("verdict") or "").lower()
    if decision in ("rejected", "denied", "deny", "refused"):
        return "denied"
    if payload.get("input_required") or decision in ("pending", "deferred"):
        return "deferred"
    return "error" if payload.get("success") is False else "allowed"


def record(receipt: Mapping[str, Any], previous_hash: str | None) -> dict[str, Any]:
    """One receipt (``seq, kind, at, payload, prev_sha256, sha256``; payload as stored text) as a sealed record."""
    text = receipt["payload"] if isinstance(receipt["payload"], str) else json.dumps(receipt["payload"])
    payload = json.loads(text)
    principal = next(
        (payload[k] for k in ("agent", "decided_by", "person") if isinstance(payload.get(k), str)), None
    )
    sealed: dict[str, Any] = {
        "event_id": f"baton-receipt-{receipt['seq']}",
        "occurred_at": occurred_at(receipt["at"]),
        "principal_id": principal or "baton",
        "event_type": receipt["kind"],
        "tool_name": payload["tool"] if isinstance(payload.get("tool"), str) else None,
        "outcome": outcome(payload),
        "previous_hash": previous_hash,
        "extensions": {
            EXTENSION: {
                "seq": str(receipt["seq"]),
                "kind": receipt["kind"],
                "at": receipt["at"],
                "receipt_sha256": receipt["sha256"],
                "receipt_prev_sha256": receipt["prev_sha256"],
                "payload_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            }
        },
    }
    sealed["event_hash"] = event_hash(sealed)
    sealed["baton_payload"] = (
        payload  # unprotected (unknown top-level fields are ignored), bound by payload_sha256
    )
    return sealed


def manifest() -> dict[str, Any]:
    """The attestation manifest (section 2.7) written beside the records."""
    return {
        "storage_mechanism": "baton receipt hash chain (one transaction per append, sha256 per receipt) anchored "
        "by Ed25519 signed checkpoints outside the database and, when configured, witness cosignatures",
        "chain_algorithm": "sha-256",
        "canonical_form_version": CANONICAL_FORM_VERSION,
        "verification_procedure_ref": "python -m baton.evidence.sep3004 EXPORT_DIR (docs/receipts.md)",
        "source_of_truth": "baton's own receipts (baton receipts export); these records are a view of them",
        "extensions": {EXTENSION: list(BATON_REGISTRY[EXTENSION])},
    }


def export(runtime: Runtime, directory: Path) -> int:
    """Write ``records.jsonl`` and ``manifest.json`` into ``directory`` (a new one 0700, files 0600: the
    records are private data); the record count. Streamed: the chain is never held in memory."""
    from sqlalchemy import select

    from baton.errors import ArgumentError
    from baton.store.private import private_dir
    from baton.store.schema import receipt_head, receipts

    if directory.exists() and not directory.is_dir():
        raise ArgumentError("invalid_arguments", f"{directory} exists and is not a directory.")
    if not directory.is_dir():  # a new directory is private; an existing one (".") is not ours to chmod
        private_dir(directory)
    names = ("seq", "kind", "at", "payload", "prev_sha256", "sha256")
    count, previous = 0, None
    with runtime.store.read() as connection, _private_text(directory / "records.jsonl") as handle:
        head = connection.execute(select(receipt_head.c.seq).where(receipt_head.c.id == 1)).scalar() or 0
        query = select(*[receipts.c[n] for n in names]).where(receipts.c.seq <= head).order_by(receipts.c.seq)
        for row in connection.execution_options(stream_results=True, yield_per=2000).execute(query):
            sealed = _sealed(dict(zip(names, row, strict=True)), previous)
            handle.write(json.dumps(sealed, ensure_ascii=False, sort_keys=True) + "\n")
            previous, count = sealed["event_hash"], count + 1
    with _private_text(directory / "manifest.json") as handle:
        handle.write(json.dumps(manifest(), indent=2) + "\n")
    return count


def _private_text(path: Path) -> Any:
    """``path`` created (or tightened) at 0600, then opened to be rewritten as text."""
    from baton.store.private import create_private_file

    create_private_file(path)
    return path.open("w", encoding="utf-8")


def _sealed(receipt: dict[str, Any], previous: str | None) -> dict[str, Any]:
    """:func:`record`, a receipt the SEP's canonical form cannot hold named as ``receipt_not_representable``."""
    from baton.errors import ReceiptError

    try:
        return record(receipt, previous)
    except ValueError as exc:
        raise ReceiptError(
            "receipt_not_representable",
            f"The receipt at seq {receipt['seq']} cannot be written as a SEP-3004 record ({exc}).",
        ) from None


def payload_problems(sealed: Mapping[str, Any]) -> list[str]:
    """The unprotected ``baton_payload`` must be the payload whose sha256 the protected extension holds."""
    payload = sealed.get("baton_payload")
    if payload is None:
        return []
    declared = ((sealed.get("extensions") or {}).get(EXTENSION) or {}).get("payload_sha256")
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(text.encode("utf-8")).hexdigest() == declared:
        return []
    return [f"baton_payload of {sealed.get('event_id')} does not match its payload_sha256"]


def verify_export(directory: Path) -> list[str]:
    """Every problem of an export: the manifest, each record's core and extensions, hashes and links."""
    problems = manifest_problems(json.loads((directory / "manifest.json").read_text(encoding="utf-8")))
    with (directory / "records.jsonl").open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    for sealed in records:
        problems += skeleton_problems(sealed) + extension_problems(sealed, BATON_REGISTRY)
        problems += payload_problems(sealed)
    return problems + segment_problems(records)


def main(argv: list[str] | None = None) -> int:
    """``python -m baton.evidence.sep3004 EXPORT_DIR``: exit 0 when the records verify."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m baton.evidence.sep3004 EXPORT_DIR\n")
        return 2
    try:
        problems = verify_export(Path(args[0]))
    except (OSError, ValueError) as exc:
        problems = [f"the export is unreadable ({exc})"]
    if problems:
        sys.stderr.write("".join(f"receipt_chain_broken: {problem}\n" for problem in problems[:20]))
        return 1
    sys.stdout.write("ok: SEP-3004 records verify (hashes, links, manifest)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
