"""Checkpoints someone else co-signs: each new checkpoint goes, as a C2SP signed note, to the witnesses of
``BATON_WITNESS_URLS``; a cosignature that verifies with the pinned key of ``BATON_WITNESS_KEYS`` is kept in
``BATON_HOME/witnessed.jsonl`` (and exported), a refusal is logged as ``receipt_witness_refused``.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from baton.chain_verify import ed25519_verify, public_key_id
from baton.config import Settings
from baton.errors import ConfigError, ReceiptError
from baton.store.private import append_private
from baton.store.schema import receipts
from baton.witness_verify import (
    EMPTY_ROOT,
    NOTE_ED25519,
    WITNESSED_FILE,
    VerifierKey,
    accumulate,
    checkpoint_body,
    cosigned_time,
    parse_vkey,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from baton.runtime import Runtime

log = logging.getLogger("baton.evidence.witnessing")

#: How long one witness may take to answer one add-checkpoint request.
TIMEOUT_SECONDS = 10.0


def log_key(settings: Settings, key: Ed25519PrivateKey) -> VerifierKey:
    """baton's note verifier key (Ed25519, type 0x01), named after the log's origin."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return VerifierKey(
        settings.baton_witness_origin or f"baton.local/{public_key_id(raw)}", NOTE_ED25519, raw
    )


def configured_witnesses(settings: Settings) -> list[tuple[str, VerifierKey]]:
    """(URL, pinned verifier key) pairs: the n-th key of ``BATON_WITNESS_KEYS`` pins the n-th URL."""
    urls = [url.strip().rstrip("/") for url in (settings.baton_witness_urls or "").split(",") if url.strip()]
    texts = [key.strip() for key in (settings.baton_witness_keys or "").split(",") if key.strip()]
    if len(urls) != len(texts):
        raise ConfigError(
            "config_invalid",
            "BATON_WITNESS_URLS and BATON_WITNESS_KEYS must list as many entries, in the same order.",
        )
    try:
        return [(url, parse_vkey(text)) for url, text in zip(urls, texts, strict=True)]
    except ValueError as exc:
        raise ConfigError("config_invalid", f"BATON_WITNESS_KEYS holds a malformed key ({exc}).") from None


def witnessed_path(settings: Settings) -> Path:
    """Where cosigned checkpoints are kept: ``BATON_HOME/witnessed.jsonl``."""
    return settings.home / WITNESSED_FILE


def sign_note(key: Ed25519PrivateKey, signer: VerifierKey, size: int, root: bytes) -> str:
    """The checkpoint at ``size`` as a signed note (tlog-checkpoint text, one Ed25519 signature line)."""
    text = checkpoint_body(signer.name, size, root)
    signature = base64.b64encode(signer.id + key.sign(text.encode("utf-8"))).decode("ascii")
    return f"{text}\n\u2014 {signer.name} {signature}\n"


def submit_all(runtime: Runtime, key: Ed25519PrivateKey, size: int) -> None:
    """Send the checkpoint at ``size`` to every configured witness; log (never raise) what goes wrong."""
    try:
        witnesses = configured_witnesses(runtime.settings)
    except ConfigError as exc:
        log.error("%s: %s", exc.error_class, exc)
        return
    if not witnesses:
        return
    hashes = _receipt_hashes(runtime, size)
    for url, witness in witnesses:
        try:
            submit(runtime.settings, key, url, witness, hashes)
        except ReceiptError as exc:
            log.error("%s: %s", exc.error_class, exc)
        except Exception:
            log.exception("could not reach the witness at %s", url)


def submit(
    settings: Settings, key: Ed25519PrivateKey, url: str, witness: VerifierKey, hashes: list[str]
) -> str:
    """Ask one witness to cosign the chain of ``hashes``; the cosigned note, kept, or ReceiptError.

    A backlog longer than ``BATON_WITNESS_MAX_PROOF_LINES`` receipts goes as several checkpoints, each
    extending the last by at most that many (63 keeps to tlog-witness's cap on proof lines)."""
    import httpx

    signer = log_key(settings, key)
    roots = [EMPTY_ROOT]
    for digest in hashes:
        roots.append(accumulate(roots[-1], digest))
    step, old, conflicted = max(1, settings.baton_witness_max_proof_lines), _last_size(settings, url), False
    with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
        while True:
            size = len(hashes) if old == 0 or old >= len(hashes) else min(len(hashes), old + step)
            note = sign_note(key, signer, size, roots[size])
            proof = [] if old == 0 else hashes[old:size]
            body = "".join(f"{line}\n" for line in [f"old {old}", *map(_b64, proof)]) + "\n" + note
            answer = client.post(f"{url}/add-checkpoint", content=body.encode("utf-8"))
            if answer.status_code == 409 and answer.text.strip().isdigit() and not conflicted:
                old, conflicted = (
                    int(answer.text.strip()),
                    True,
                )  # the size the witness holds: once from there
                continue
            cosigned = _cosigned(answer, note, url, witness, size)
            row = {"url": url, "witness": witness.name, "size": size, "note": cosigned}
            append_private(witnessed_path(settings), json.dumps(row, sort_keys=True) + "\n", sync=True)
            if size == len(hashes):
                return cosigned
            old = size


def _cosigned(answer: Any, note: str, url: str, witness: VerifierKey, size: int) -> str:
    """The note with the witness's cosignature from its answer, or ReceiptError (refused, or not verifying)."""
    if answer.status_code != 200:
        raise ReceiptError(
            "receipt_witness_refused",
            f"The witness {witness.name} refused the checkpoint at seq {size} (HTTP "
            f"{answer.status_code}: {answer.text.strip()[:200]}).",
        )
    cosigned = note + "".join(line + "\n" for line in answer.text.splitlines() if line.strip())
    if cosigned_time(cosigned, witness, ed25519_verify) is None:
        raise ReceiptError(
            "receipt_witness_refused",
            f"The witness at {url} answered without a cosignature that verifies with the pinned key "
            f"{witness.name}.",
        )
    return cosigned


def _b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def _last_size(settings: Settings, url: str) -> int:
    """The largest size this home had cosigned by the witness at ``url`` (0: none yet)."""
    path = witnessed_path(settings)
    if not path.is_file():
        return 0
    sizes = [0]
    for line in path.read_text(encoding="utf-8").splitlines():
        row: Any = json.loads(line) if line.strip() else {}
        if isinstance(row, dict) and row.get("url") == url and isinstance(row.get("size"), int):
            sizes.append(row["size"])
    return max(sizes)


def _receipt_hashes(runtime: Runtime, size: int) -> list[str]:
    """The sha256 of receipts 1..size, in order (what the accumulator and the proofs are made of)."""
    query = select(receipts.c.sha256).where(receipts.c.seq <= size).order_by(receipts.c.seq)
    with runtime.store.read() as connection:
        return [str(value) for value in connection.execute(query).scalars()]
