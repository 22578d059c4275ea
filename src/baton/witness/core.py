"""A tlog-witness (c2sp.org/tlog-witness) for baton's checkpoints: it cosigns a log's checkpoint only when it
extends the last one it cosigned for that log, so a rolled-back or forked chain gets no cosignature.

Its Ed25519 key lives in its own home (0600, never printed; its public verifier key is written beside it),
its state (the newest cosigned checkpoint per origin) in ``state.json`` there, checked and replaced under a
thread lock and a file lock, so two requests (or two processes) cannot roll each other back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton import clock
from baton.chain_verify import ed25519_verify
from baton.store.private import FILE_MODE, private_dir, private_file, write_private
from baton.witness_verify import (
    COSIGNATURE_ED25519,
    EMPTY_ROOT,
    VerifierKey,
    accumulate,
    cosignature_message,
    parse_body,
    signed_by,
    split_note,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: tlog-witness caps a proof at 63 lines (log2 of a Merkle tree); a hash-chain proof holds one hash per
#: receipt since the last cosigned size, so baton's witness allows more (docs/receipts.md).
MAX_PROOF_LINES = 100_000
SIZE_CONTENT_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class Answer:
    """An add-checkpoint response: HTTP status, content type and body."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


def load_or_create_key(path: Path) -> Ed25519PrivateKey:
    """The witness's Ed25519 key at ``path``, created 0600 in a 0700 directory on first use."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private_dir(path.parent)
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
    private_file(path)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} does not hold an Ed25519 key")
    return key


def raw_public(key: Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``key``'s public half."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def origin_hash(origin: str) -> str:
    """The monitoring path segment of a log: lowercase hex SHA-256 of its origin."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


class Witness:
    """One witness: its key and name, the logs it trusts (origin -> note key) and what it cosigned."""

    def __init__(self, home: Path, name: str, log_keys: list[VerifierKey]) -> None:
        self.home = private_dir(home)
        self.key = load_or_create_key(home / "witness.key")
        self.vkey = VerifierKey(name, COSIGNATURE_ED25519, raw_public(self.key))
        (home / "witness.vkey").write_text(self.vkey.encode() + "\n", encoding="ascii")
        self.logs = {key.name: key for key in log_keys}
        self.state_path = home / "state.json"
        self._lock = threading.Lock()

    def _state(self) -> dict[str, Any]:
        if not self.state_path.is_file():
            return {}
        state = json.loads(self.state_path.read_text(encoding="utf-8"))
        return state if isinstance(state, dict) else {}

    def latest(self, hashed_origin: str) -> str | None:
        """The newest cosigned checkpoint (log signature and cosignature) of the log with this origin hash."""
        for origin, row in self._state().items():
            if origin_hash(origin) == hashed_origin:
                return str(row["note"])
        return None

    def add_checkpoint(self, body: bytes) -> Answer:
        """tlog-witness add-checkpoint: check, cosign and persist atomically, or refuse with the spec's status."""
        try:
            old, proof, note = _parse_request(body)
            text, _ = split_note(note)
            origin, size, root = parse_body(text)
        except (ValueError, UnicodeDecodeError):
            return Answer(400, "malformed add-checkpoint request\n")
        log_key = self.logs.get(origin)
        if log_key is None:
            return Answer(404, "unknown log origin\n")
        if not signed_by(note, log_key, ed25519_verify):
            return Answer(403, "no valid signature from the log's trusted key\n")
        if old > size:
            return Answer(400, "old size is larger than the checkpoint size\n")
        with self._lock, _file_lock(self.home / "state.lock"):
            state = self._state()
            held = state.get(origin, {"size": 0, "root": base64.b64encode(EMPTY_ROOT).decode()})
            if old != held["size"]:
                return Answer(409, f"{held['size']}\n", SIZE_CONTENT_TYPE)
            if not _consistent(base64.b64decode(held["root"]), old, proof, size, root):
                return Answer(422, "the checkpoint is not consistent with the one cosigned before\n")
            line = self.cosign(text)
            state[origin] = {"size": size, "root": base64.b64encode(root).decode(), "note": note + line}
            tmp = self.state_path.with_name(f".state.{os.getpid()}.tmp")
            _persist(tmp, self.state_path, json.dumps(state, sort_keys=True).encode("utf-8"))
        return Answer(200, line)

    def cosign(self, text: str) -> str:
        """A timestamped Ed25519 cosignature line (tlog-cosignature/v1) on a checkpoint's note text."""
        timestamp = int(clock.time())
        signature = self.key.sign(cosignature_message(text, timestamp))
        raw = self.vkey.id + timestamp.to_bytes(8, "big") + signature
        return f"\u2014 {self.vkey.name} {base64.b64encode(raw).decode('ascii')}\n"


def _persist(tmp: Path, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably before the cosignature leaves (tlog-witness: persist, then answer)."""
    write_private(tmp, data)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` held across processes: two witnesses serving one home stay atomic too."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _parse_request(body: bytes) -> tuple[int, list[bytes], str]:
    """(old size, proof hashes, signed note) of an add-checkpoint body."""
    head, sep, note = body.decode("utf-8").partition("\n\n")
    lines = head.split("\n")
    if not sep or not lines[0].startswith("old ") or len(lines) - 1 > MAX_PROOF_LINES:
        raise ValueError("malformed request")
    digits = lines[0][4:]
    if not digits.isdigit() or digits != str(int(digits)):
        raise ValueError("malformed old size")
    proof = [base64.b64decode(line, validate=True) for line in lines[1:]]
    if any(len(item) != 32 for item in proof):
        raise ValueError("a proof line is not a 32-byte hash")
    return int(digits), proof, note


def _consistent(held: bytes, old: int, proof: list[bytes], size: int, root: bytes) -> bool:
    """Whether ``root`` at ``size`` extends the held root at ``old`` through the receipt hashes in ``proof``."""
    if size == 0:
        return root == EMPTY_ROOT and not proof
    if old == 0:
        return not proof  # the empty chain is consistent with any chain (trust on first use)
    if len(proof) != size - old:
        return False
    for digest in proof:
        held = accumulate(held, digest.hex())
    return held == root
