"""Signed checkpoints: the receipt chain anchored outside the database (docs/receipts.md).

Every so often, and at shutdown, the server signs the chain head (seq, sha256, at) with an Ed25519 key
that lives outside the database, stores the checkpoint in ``receipt_checkpoints`` and appends it to a
file outside the database. ``baton receipts verify`` checks each signature and that the chain still holds
every checkpointed head at its seq; rewinding, truncating or rewriting the store then shows.

The checkpointer takes its own position (the last head it signed) only from checkpoints whose signature
verifies with its key, from the table and the file alike: a row someone wrote into the database without the
key (say, one with a huge seq) cannot make it stop signing. Before it signs a new head it checks that the
chain still holds the head it signed last, and refuses to sign a chain that contradicts its own anchor.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from sqlalchemy import insert, select

from baton import clock
from baton.chain_verify import (
    GENESIS_SHA256,
    checkpoint_message,
    checkpoint_problem,
    parse_strict,
    public_key_id,
    read_public_key,
)
from baton.config import Settings
from baton.errors import ReceiptError
from baton.evidence.canonical import utc_now
from baton.store.private import FILE_MODE, append_private, private_dir, private_file
from baton.store.schema import receipt_checkpoints, receipt_head, receipts

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from baton.runtime import Runtime

log = logging.getLogger("baton.evidence.checkpoints")

#: How often the serving loop looks at the chain head (one small SELECT).
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement that the chain's head was ``sha256`` at ``seq`` at time ``at``."""

    seq: int
    sha256: str
    at: str
    key_id: str
    signature: str


def key_path(settings: Settings) -> Path:
    """The private key: ``BATON_CHECKPOINT_KEY_PATH`` or ``BATON_HOME/keys/checkpoint.key``."""
    return settings.baton_checkpoint_key_path or settings.home / "keys" / "checkpoint.key"


def public_key_path(settings: Settings) -> Path:
    """The exported public key, next to the private key (``checkpoint.pub``)."""
    return key_path(settings).with_suffix(".pub")


def file_path(settings: Settings) -> Path:
    """The checkpoint file outside the database: ``BATON_CHECKPOINT_PATH`` or ``BATON_HOME/checkpoints.jsonl``."""
    return settings.baton_checkpoint_path or settings.home / "checkpoints.jsonl"


def load_or_create_key(settings: Settings) -> Ed25519PrivateKey:
    """The signing key, created (0600, in a 0700 directory) on first use; its public key is exported."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = key_path(settings)
    if settings.baton_checkpoint_key_path is None:
        private_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process created it first: use theirs
            os.link(tmp, path)
        tmp.unlink()
    private_file(path)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise ReceiptError(
            "checkpoint_key_unavailable", f"The checkpoint key at {path} could not be read."
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ReceiptError(
            "checkpoint_key_unavailable", f"The checkpoint key at {path} is not an Ed25519 key."
        )
    public = public_key_path(settings)
    raw = _raw_public(key)
    if not public.exists() or public.read_text(encoding="ascii").strip() != raw.hex():
        public.unlink(missing_ok=True)
        append_private(public, raw.hex() + "\n")  # not secret, but kept as private as the rest of the home
    return key


def _raw_public(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def trusted_public_keys(settings: Settings) -> dict[str, bytes]:
    """The keys ``receipts verify`` trusts: the configured key's public half (never one from the store)."""
    public = public_key_path(settings)
    raw: bytes | None = None
    if public.is_file():
        with contextlib.suppress(OSError, ValueError):
            raw = read_public_key(public)
    if raw is None and key_path(settings).is_file():
        with contextlib.suppress(ReceiptError, OSError):
            raw = _raw_public(load_or_create_key(settings))
    return {public_key_id(raw): raw} if raw else {}


def sign(key: Ed25519PrivateKey, seq: int, sha256: str, at: str | None = None) -> Checkpoint:
    """A checkpoint of the head (seq, sha256), signed now."""
    at = at or utc_now()
    key_id = public_key_id(_raw_public(key))
    signature = key.sign(checkpoint_message(seq, sha256, at, key_id)).hex()
    return Checkpoint(seq=seq, sha256=sha256, at=at, key_id=key_id, signature=signature)


def _seq_of(row: dict[str, Any]) -> int:
    seq = row.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


def read_file(path: Path) -> Iterator[dict[str, Any]]:
    """The checkpoints in a checkpoint file (a malformed line is reported as one, never skipped silently)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = parse_strict(line)
            except ValueError:
                row = None
            yield row if isinstance(row, dict) else {"malformed_line": number}


class Checkpointer:
    """Signs the chain head of one runtime's store, into the store and the checkpoint file."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self._key: Ed25519PrivateKey | None = None
        self._anchor: tuple[int, str] | None = None
        self._refused_at: int | None = None
        self._last_time = clock.monotonic()

    def key(self) -> Ed25519PrivateKey:
        """The signing key, loaded (or created) once."""
        if self._key is None:
            self._key = load_or_create_key(self.settings)
        return self._key

    def head(self) -> tuple[int, str]:
        """The chain's committed head (seq 0 and the genesis hash for an empty chain)."""
        with self.runtime.store.read() as connection:
            row = connection.execute(
                select(receipt_head.c.seq, receipt_head.c.sha256).where(receipt_head.c.id == 1)
            ).first()
        return (int(row.seq), str(row.sha256)) if row else (0, "0" * 64)

    def anchor(self) -> tuple[int, str]:
        """The newest head this key signed, from the table or the file (seq 0 and the genesis hash when none):
        rows whose signature does not verify are ignored, never trusted as a position."""
        if self._anchor is None:
            self._anchor = self._read_anchor()
        return self._anchor

    def last_seq(self) -> int:
        """The highest seq this key has signed a checkpoint of."""
        return self.anchor()[0]

    def _read_anchor(self) -> tuple[int, str]:
        if not key_path(self.settings).is_file():
            return 0, GENESIS_SHA256  # no key yet, so nothing was signed by it
        raw = _raw_public(self.key())
        keys = {public_key_id(raw): raw}
        candidates = all_checkpoints(self.runtime)
        ignored = 0
        for row in sorted(candidates, key=_seq_of, reverse=True):
            if checkpoint_problem(row, keys) is None:
                if ignored:
                    log.warning(
                        "receipt_checkpoint_invalid: ignored %d checkpoint(s) above seq %d whose signature "
                        "does not verify (run `baton receipts verify`)",
                        ignored,
                        row["seq"],
                    )
                return int(row["seq"]), str(row["sha256"])
            ignored += 1
        if ignored:
            log.warning(
                "receipt_checkpoint_invalid: ignored %d checkpoint(s) whose signature does not verify "
                "(run `baton receipts verify`)",
                ignored,
            )
        return 0, GENESIS_SHA256

    def _hash_at(self, seq: int) -> str | None:
        if seq == 0:
            return GENESIS_SHA256
        with self.runtime.store.read() as connection:
            value = connection.execute(select(receipts.c.sha256).where(receipts.c.seq == seq)).scalar()
        return None if value is None else str(value)

    def due(self) -> bool:
        """Whether the head moved ``BATON_CHECKPOINT_EVERY_RECEIPTS`` receipts, or moved at all and
        ``BATON_CHECKPOINT_INTERVAL_SECONDS`` passed, since the last checkpoint."""
        seq, _ = self.head()
        behind = seq - self.last_seq()
        if behind <= 0 or seq == self._refused_at:
            return False
        elapsed = clock.monotonic() - self._last_time
        return behind >= self.settings.baton_checkpoint_every_receipts or (
            elapsed >= self.settings.baton_checkpoint_interval_seconds
        )

    def checkpoint(self) -> Checkpoint | None:
        """Sign the current head (unless it is the genesis or already checkpointed); store and file it.

        Refused (``receipt_checkpoint_mismatch``) when the chain no longer holds the head this key signed
        last: signing it would vouch for a rewritten or rewound history."""
        seq, sha256 = self.head()
        anchor_seq, anchor_sha256 = self.anchor()
        if seq == 0 or (seq, sha256) == (anchor_seq, anchor_sha256):
            return None
        if seq <= anchor_seq or self._hash_at(anchor_seq) != anchor_sha256:
            self._refused_at = seq  # said once per head, not at every poll
            raise ReceiptError(
                "receipt_checkpoint_mismatch",
                f"The chain no longer holds the head this server signed at seq {anchor_seq}: not signing "
                "the rewritten chain (run `baton receipts verify`).",
            )
        checkpoint = sign(self.key(), seq, sha256)
        row = asdict(checkpoint)
        with self.runtime.store.write() as connection:
            connection.execute(insert(receipt_checkpoints).values(**row))
        append_private(file_path(self.settings), json.dumps(row, sort_keys=True) + "\n", sync=True)
        self._anchor, self._last_time = (seq, sha256), clock.monotonic()
        from baton.evidence.witnessing import submit_all

        submit_all(
            self.runtime, self.key(), seq
        )  # BATON_WITNESS_URLS: a witness cosigns it (docs/receipts.md)
        return checkpoint

    def checkpoint_quietly(self) -> None:
        """``checkpoint()``, logging a failure instead of raising it (the server keeps serving)."""
        try:
            self.checkpoint()
        except ReceiptError as exc:
            log.error("%s: %s", exc.error_class, exc)
        except Exception:
            log.exception("could not write a receipt checkpoint")

    async def run(self) -> None:
        """While serving: checkpoint whenever one is due."""
        interval = min(POLL_SECONDS, self.settings.baton_checkpoint_interval_seconds)
        while True:
            await anyio.sleep(interval)
            try:
                due = await anyio.to_thread.run_sync(self.due)
            except Exception:
                log.exception("could not read the chain head")
                continue
            if due:
                await anyio.to_thread.run_sync(self.checkpoint_quietly)


def stored_checkpoints(runtime: Runtime) -> list[dict[str, Any]]:
    """Every checkpoint the store holds, oldest first."""
    columns = [receipt_checkpoints.c[name] for name in ("seq", "sha256", "at", "key_id", "signature")]
    with runtime.store.read() as connection:
        rows = connection.execute(select(*columns).order_by(receipt_checkpoints.c.id)).all()
    return [dict(row._mapping) for row in rows]


def all_checkpoints(runtime: Runtime) -> list[dict[str, Any]]:
    """The store's checkpoints and the file's, each once (either copy alone anchors the chain)."""
    seen: dict[str, dict[str, Any]] = {}
    for row in [*stored_checkpoints(runtime), *read_file(file_path(runtime.settings))]:
        seen.setdefault(json.dumps(row, sort_keys=True), row)
    return list(seen.values())
