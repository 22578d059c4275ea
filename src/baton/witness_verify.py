"""Witnessed checkpoints (C2SP signed-note, tlog-checkpoint, tlog-cosignature), checked offline.

Stdlib only, like ``chain_verify``: the caller passes the Ed25519 verify function (``chain_verify`` passes
its own), so an auditor needs nothing but this file, the export and the witness's pinned verifier key.

baton's chain is a hash chain, not a Merkle tree, so a checkpoint's root hash is the chain accumulator
``A(n) = SHA-256(0x01 || A(n-1) || h(n))`` over the receipts' own sha256, with ``A(0) = SHA-256("")``
(the empty-tree hash tlog-witness requires of size 0). A consistency proof from size m to n is the list of
receipt hashes m+1..n: the witness recomputes ``A(n)`` from the ``A(m)`` it holds (docs/receipts.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: (public key, message, signature) -> valid.
Verify = Callable[[bytes, bytes, bytes], bool]

EMPTY_ROOT = hashlib.sha256(b"").digest()
#: signed-note signature types: an Ed25519 note signature (the log) and a timestamped cosignature (witness).
NOTE_ED25519 = 0x01
COSIGNATURE_ED25519 = 0x04
WITNESSED_FILE = "witnessed.jsonl"
WITNESS_ROLLBACK = "receipt_witness_rollback"


def accumulate(root: bytes, receipt_sha256: str) -> bytes:
    """The accumulator one receipt further: ``SHA-256(0x01 || root || receipt hash)``."""
    return hashlib.sha256(b"\x01" + root + bytes.fromhex(receipt_sha256)).digest()


def roots(receipt_hashes: Iterable[str]) -> Iterator[bytes]:
    """``A(1), A(2), ...`` over the chain's receipt hashes in order."""
    root = EMPTY_ROOT
    for digest in receipt_hashes:
        root = accumulate(root, digest)
        yield root


def checkpoint_body(origin: str, size: int, root: bytes) -> str:
    """A tlog-checkpoint note text: origin, size and base64 root hash, each line ending in a newline."""
    return f"{origin}\n{size}\n{base64.b64encode(root).decode('ascii')}\n"


def parse_body(body: str) -> tuple[str, int, bytes]:
    """(origin, size, root) of a checkpoint note text; ValueError when it is not one."""
    lines = body.split("\n")
    if len(lines) < 4 or lines[-1] != "" or not lines[0] or not lines[1].isdigit():
        raise ValueError("not a checkpoint")
    if lines[1] != str(int(lines[1])):
        raise ValueError("a checkpoint size has leading zeroes")
    root = base64.b64decode(lines[2], validate=True)
    if len(root) != 32:
        raise ValueError("a checkpoint root is not 32 bytes")
    return lines[0], int(lines[1]), root


def key_id(name: str, signature_type: int, public_key: bytes) -> bytes:
    """signed-note key ID: the first 4 bytes of SHA-256(name || 0x0A || type || public key)."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([signature_type]) + public_key).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    """A signed-note verifier key (``name+hex(key id)+base64(type || public key)``)."""

    name: str
    signature_type: int
    public_key: bytes

    @property
    def id(self) -> bytes:
        """This key's 4-byte key ID."""
        return key_id(self.name, self.signature_type, self.public_key)

    def encode(self) -> str:
        """The vkey text."""
        material = base64.b64encode(bytes([self.signature_type]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.id.hex()}+{material}"


def parse_vkey(text: str) -> VerifierKey:
    """A vkey, checked (its key ID must match its name and key); ValueError otherwise."""
    name, hex_id, material = text.strip().split("+", 2)
    raw = base64.b64decode(material, validate=True)
    key = VerifierKey(name, raw[0], raw[1:])
    if not name or len(key.public_key) != 32 or key.id.hex() != hex_id.lower():
        raise ValueError("the verifier key is malformed or its key ID does not match")
    return key


def split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """(text, [(key name, key ID || signature)]) of a signed note; ValueError when malformed."""
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise ValueError("not a signed note")
    lines = []
    for line in signatures[:-1].split("\n"):
        dash, name, encoded = line.split(" ")
        if dash != "\u2014":
            raise ValueError("a signature line does not start with an em dash")
        lines.append((name, base64.b64decode(encoded, validate=True)))
    return text + "\n", lines


def cosignature_message(body: str, timestamp: int) -> bytes:
    """What a tlog-cosignature/v1 Ed25519 cosignature signs."""
    return f"cosignature/v1\ntime {timestamp}\n".encode() + body.encode("utf-8")


def cosigned_time(note: str, witness: VerifierKey, verify: Verify) -> int | None:
    """The timestamp of ``witness``'s valid cosignature on ``note``, or None when it has none that verifies."""
    text, signatures = split_note(note)
    for name, raw in signatures:
        if name != witness.name or raw[:4] != witness.id or len(raw) != 4 + 8 + 64:
            continue
        timestamp = int.from_bytes(raw[4:12], "big")
        if verify(witness.public_key, cosignature_message(text, timestamp), raw[12:]):
            return timestamp
    return None


def signed_by(note: str, key: VerifierKey, verify: Verify) -> bool:
    """Whether ``note`` is signed by ``key`` (Ed25519, type 0x01): at least one line, and every line naming the
    key verifies (signed-note: a note with a bad signature from a known key is rejected)."""
    text, signatures = split_note(note)
    mine = [raw[4:] for name, raw in signatures if name == key.name and raw[:4] == key.id]
    return bool(mine) and all(verify(key.public_key, text.encode("utf-8"), signature) for signature in mine)


def witnessed_problem(
    directory: Path, witness: VerifierKey, verify: Verify, latest: str | None = None
) -> str | None:
    """Why the export in ``directory`` contradicts the checkpoints ``witness`` cosigned (its ``witnessed.jsonl``
    and ``latest``, the witness's own newest cosigned checkpoint), or None when it holds every one."""
    notes = [row["note"] for row in _read_jsonl(directory / WITNESSED_FILE)]
    if latest is not None:
        notes.append(latest)
    cosigned: list[tuple[int, bytes]] = []
    for note in notes:
        try:
            if cosigned_time(note, witness, verify) is None:
                continue
            _, size, root = parse_body(split_note(note)[0])
        except (ValueError, TypeError):
            return "a witnessed checkpoint is malformed"
        cosigned.append((size, root))
    if not cosigned:
        return f"no checkpoint in the export is cosigned by the pinned witness {witness.name} (withheld?)"
    want = dict(cosigned)
    chain = [str(row.get("sha256", "")) for row in _read_jsonl(directory / "receipts.jsonl")]
    for size, root in enumerate(roots(chain), 1):
        if size in want and want.pop(size) != root:
            return (
                f"the chain differs from the checkpoint the witness cosigned at seq {size} (forked history)"
            )
    if want:
        return (
            f"the witness cosigned the chain at seq {max(want)} but the export ends at seq {len(chain)} "
            "(rolled back or withheld)"
        )
    if latest is not None and cosigned_time(latest, witness, verify) is None:
        return f"the witness's latest checkpoint is not cosigned by {witness.name}"
    return None


def _read_jsonl(path: Path) -> Iterator[dict[str, str]]:
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                yield row if isinstance(row, dict) else {}
