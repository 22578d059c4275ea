"""The store's chain checked against its signed checkpoints, and exported for an independent verifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from baton.chain_verify import ChainReport
from baton.errors import ArgumentError, ReceiptError
from baton.evidence.checkpoints import all_checkpoints, public_key_path, trusted_public_keys
from baton.store.private import FILE_MODE, private_dir
from baton.store.schema import receipt_head, receipts
from baton.witness_verify import WITNESSED_FILE

if TYPE_CHECKING:
    from baton.runtime import Runtime


def verify_store(runtime: Runtime) -> ChainReport:
    """``baton receipts verify``: the chain, streamed, with every checkpoint of the store and the file."""
    return runtime.receipts.verify(
        checkpoints=all_checkpoints(runtime), public_keys=trusted_public_keys(runtime.settings)
    )


def export(runtime: Runtime, directory: Path) -> dict[str, int]:
    """Write ``receipts.jsonl`` (each stored receipt, payload as stored), ``checkpoints.jsonl`` and
    ``checkpoint.pub`` into ``directory`` (0700, files 0600: the receipts are private data)."""
    public = public_key_path(runtime.settings)
    if not public.is_file():
        raise ReceiptError(
            "checkpoint_key_unavailable",
            f"No checkpoint public key at {public}: nothing has been checkpointed with this home's key yet.",
        )
    if directory.exists() and not directory.is_dir():
        raise ArgumentError(
            "invalid_arguments",
            f"{directory} exists and is not a directory: export writes receipts.jsonl, checkpoints.jsonl "
            "and checkpoint.pub into a directory.",
        )
    if not directory.is_dir():  # a new directory is private; an existing one (".") is not ours to chmod
        private_dir(directory)
    count = 0
    with runtime.store.read() as connection:
        head = connection.execute(select(receipt_head.c.seq).where(receipt_head.c.id == 1)).scalar()
        columns = [receipts.c[name] for name in ("seq", "kind", "at", "payload", "prev_sha256", "sha256")]
        query = select(*columns).where(receipts.c.seq <= (head or 0)).order_by(receipts.c.seq)
        rows = connection.execution_options(stream_results=True, yield_per=2000).execute(query)
        with _private_open(directory / "receipts.jsonl") as handle:
            for seq, kind, at, payload, prev_sha256, sha256 in rows:
                head_fields = json.dumps({"seq": seq, "kind": kind, "at": at}, ensure_ascii=False)[:-1]
                tail_fields = json.dumps({"prev_sha256": prev_sha256, "sha256": sha256})[1:]
                # the payload goes out byte for byte as stored, so the verifier judges the same bytes
                handle.write(f'{head_fields},"payload":{payload},{tail_fields}\n')
                count += 1
    checkpoints = all_checkpoints(runtime)
    with _private_open(directory / "checkpoints.jsonl") as handle:
        for checkpoint in checkpoints:
            handle.write(json.dumps(checkpoint, sort_keys=True) + "\n")
    (directory / "checkpoint.pub").write_text(public.read_text(encoding="ascii"), encoding="ascii")
    witnessed = runtime.settings.home / WITNESSED_FILE
    if witnessed.is_file():  # the checkpoints witnesses cosigned, for `chain_verify --witness-key`
        with _private_open(directory / WITNESSED_FILE) as handle:
            handle.write(witnessed.read_text(encoding="utf-8"))
    return {
        "receipts": count,
        "checkpoints": len(checkpoints),
        "policies": _export_policies(runtime, directory),
    }


def _export_policies(runtime: Runtime, directory: Path) -> int:
    """Copy every policy version kept (content-addressed) into ``directory/policies`` for replay."""
    from baton.evidence.policy_archive import SUFFIXES, archive_dir

    kept = [p for p in sorted(archive_dir(runtime.settings).glob("*.*")) if p.suffix[1:] in SUFFIXES]
    target = private_dir(directory / "policies")
    for path in kept:
        with _private_open(target / path.name) as handle:
            handle.write(path.read_text(encoding="utf-8"))
    return len(kept)


def verify_export_dir(runtime: Runtime, directory: Path, public_key: Path | None) -> ChainReport:
    """An export checked as ``python -m baton.chain_verify`` does, with ``public_key`` (default: this home's
    checkpoint key, never the copy inside the export)."""
    from baton.chain_verify import read_public_key, verify_export

    key_path = public_key or public_key_path(runtime.settings)
    try:
        key = read_public_key(key_path)
    except (OSError, ValueError) as exc:
        raise ReceiptError(
            "checkpoint_key_unavailable", f"The public key {key_path} could not be read ({exc})."
        ) from None
    return verify_export(directory, key)


def _private_open(path: Path) -> Any:
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "w", encoding="utf-8")
