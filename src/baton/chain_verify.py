"""Independent verifier of a receipt chain and its signed checkpoints. Imports only the standard library.

One walk serves ``baton receipts verify`` (rows streamed from the store), ``baton campaign verify`` and
an exported chain checked by someone who holds nothing but the public key::

    python -m baton.chain_verify EXPORT_DIR --public-key checkpoint.pub

Ed25519 signatures are checked with ``cryptography`` when it is importable, else with the pure-Python
verifier of RFC 8032 below (slower, same answers), so the module never needs more than the standard
library. Canonical JSON is the one of SPEC.md section 4, restated here so the file stands alone. A
receipt that carries a subagent's delegation chain has that chain checked too: each link hashed, linked to
the one before and a subset of it (:mod:`baton.delegation`, standard library only as well); a widening
chain fails as ``receipt_delegation_widens``.

The walk also checks every passkey approval's WebAuthn assertion (``_Approvals``): over the request's action
hash, by the approver's own key as enrolled earlier in the chain and not revoked by then, N distinct keys for
a quorum of N. ES256 and RS256 signatures need ``cryptography``; without it they are reported unchecked and
everything else is still checked. The module is one file on purpose (past the house's ~400 lines): a copy of
it beside ``delegation.py`` (and ``witness_verify.py`` for ``--witness-key``), all standard library only,
verifies an export without baton installed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

try:
    from baton.delegation import DELEGATION_WIDENS, Ledger
except ImportError:  # this file copied beside delegation.py, without baton (docs/receipts.md)
    from delegation import DELEGATION_WIDENS, Ledger  # type: ignore[import-not-found, no-redef]

GENESIS_SHA256 = "0" * 64
#: What a checkpoint signature covers (with seq, sha256, at and key_id), so it can mean nothing else.
CHECKPOINT_DOMAIN = "baton.evidence.receipts.checkpoint.v1"
CHAIN_BROKEN = "receipt_chain_broken"
CHECKPOINT_INVALID = "receipt_checkpoint_invalid"
CHECKPOINT_MISMATCH = "receipt_checkpoint_mismatch"

#: One receipt as the walk reads it: seq, kind, at, payload (stored text or a parsed value), prev, sha256.
Row = tuple[Any, Any, Any, Any, Any, Any]


def canonical(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))``."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class ChainReport:
    """The outcome of recomputing the chain and checking its checkpoints."""

    ok: bool
    count: int
    head_sha256: str
    first_bad_seq: int | None = None
    reason: str | None = None
    error_class: str | None = None
    #: Signed checkpoints that verified, and the highest seq they anchor (0: none).
    checkpoints: int = 0
    anchored_seq: int = 0
    #: Passkey assertions checked (approvals that carry their proof), and whether their signatures were.
    assertions: int = 0
    signatures_checked: bool = True


def public_key_id(public_key: bytes) -> str:
    """A checkpoint key's id: the first 16 hex digits of sha256 of its 32 raw bytes."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def checkpoint_message(seq: int, sha256: str, at: str, key_id: str) -> bytes:
    """The bytes a checkpoint's Ed25519 signature covers."""
    body = {"domain": CHECKPOINT_DOMAIN, "seq": seq, "sha256": sha256, "at": at, "key_id": key_id}
    return canonical(body).encode("utf-8")


def read_public_key(path: Path) -> bytes:
    """A public key file as baton writes it: the 32 raw bytes in hex on one line."""
    raw = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(raw) != 32:
        raise ValueError(f"{path} does not hold a 32-byte Ed25519 public key")
    return raw


# Ed25519 verification (RFC 8032 section 6, verification only; public inputs, so timing does not matter)

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_Point = tuple[int, int, int, int]


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    if x2 % _P == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    return _P - x if (x & 1) != sign else x


def _add(a: _Point, b: _Point) -> _Point:
    p1 = (a[1] - a[0]) * (b[1] - b[0]) % _P
    p2 = (a[1] + a[0]) * (b[1] + b[0]) % _P
    p3 = 2 * a[3] * b[3] * _D % _P
    p4 = 2 * a[2] * b[2] % _P
    e, f, g, h = p2 - p1, p4 - p3, p4 + p3, p2 + p1
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(scalar: int, point: _Point) -> _Point:
    result: _Point = (0, 1, 1, 0)
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def _decompress(data: bytes) -> _Point | None:
    y = int.from_bytes(data, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
assert _GX is not None
_G: _Point = (_GX, _GY, 1, _GX * _GY % _P)


def ed25519_verify_pure(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """RFC 8032 Ed25519 verification in pure Python."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a, r = _decompress(public_key), _decompress(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little") % _L
    left, right = _mul(s, _G), _add(r, _mul(h, a))
    return (left[0] * right[2] - right[0] * left[2]) % _P == 0 and (
        left[1] * right[2] - right[1] * left[2]
    ) % _P == 0


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Ed25519 verification: ``cryptography`` when importable, else the pure-Python verifier."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return ed25519_verify_pure(public_key, message, signature)
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


# signed approvals: each passkey approval's WebAuthn assertion, checked against the key enrolled in the chain

APPROVAL_INVALID = "receipt_approval_invalid"
#: authenticatorData flags: the user was present (UP) and verified (UV).
_UP, _UV = 0x01, 0x04
SIGNATURES_UNCHECKED = "signatures not checked: cryptography missing"


def action_tool(kind: str, provenance: Any) -> str:
    """The action's name: a gateway call's ``{adapter_id}__{tool}``, else ``baton.hitl.<kind>``."""
    if isinstance(provenance, Mapping) and provenance.get("adapter_id") and provenance.get("tool"):
        return f"{provenance['adapter_id']}__{provenance['tool']}"
    return f"baton.hitl.{kind}"


def action_sha256(action: Mapping[str, Any]) -> bytes:
    """SEP-2672's action hash with baton's two further fields: sha256 of the tool, the arguments' digest, the
    server, the request id and the quorum, UTF-8, separated by 0x00 bytes."""
    fields = ("tool", "arguments_sha256", "server", "request_id", "required_approvals")
    return hashlib.sha256(b"\x00".join(str(action[name]).encode("utf-8") for name in fields)).digest()


def approval_challenge(action: Mapping[str, Any], nonce: str) -> bytes:
    """The WebAuthn challenge of an approval: the single-use nonce, then the action hash (SEP-2672's shape)."""
    return nonce.encode("utf-8") + action_sha256(action)


def b64url(data: bytes) -> str:
    """Unpadded base64url, as WebAuthn writes it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("not base64url text")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _cbor(data: bytes, at: int = 0) -> tuple[Any, int]:
    """One CBOR item (the subset a COSE key uses: integers, byte and text strings, arrays, maps)."""
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        length = info
    elif info <= 27:
        size = 1 << (info - 24)
        length, at = int.from_bytes(data[at : at + size], "big"), at + size
    else:
        raise ValueError("unsupported CBOR item")
    if major in (0, 1):
        return (length if major == 0 else -1 - length), at
    if major in (2, 3):
        raw = data[at : at + length]
        return (raw if major == 2 else raw.decode("utf-8")), at + length
    if major == 4:
        items = []
        for _ in range(length):
            item, at = _cbor(data, at)
            items.append(item)
        return items, at
    if major == 5:
        found: dict[Any, Any] = {}
        for _ in range(length):
            key, at = _cbor(data, at)
            found[key], at = _cbor(data, at)
        return found, at
    raise ValueError("unsupported CBOR item")


def cose_verify(cose_key: bytes, message: bytes, signature: bytes) -> bool | None:
    """Whether ``signature`` over ``message`` verifies with a COSE public key (ES256, EdDSA, RS256); None when
    ``cryptography`` is missing for ES256 or RS256."""
    key, _ = _cbor(cose_key)
    if not isinstance(key, dict):
        return False
    if key.get(3) == -8:  # EdDSA (Ed25519): checked without cryptography too
        return ed25519_verify(key[-2], message, signature)
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    except ImportError:
        return None
    try:
        if key[3] == -7:  # ES256: EC2 on P-256
            numbers = ec.EllipticCurvePublicNumbers(
                int.from_bytes(key[-2], "big"), int.from_bytes(key[-3], "big"), ec.SECP256R1()
            )
            numbers.public_key().verify(signature, message, ec.ECDSA(hashes.SHA256()))
        elif key[3] == -257:  # RS256
            public = rsa.RSAPublicNumbers(int.from_bytes(key[-2], "big"), int.from_bytes(key[-1], "big"))
            public.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
        else:
            return False
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    return True


@dataclass
class _Enrolled:
    person: str
    public_key: bytes
    revoked_seq: int | None = None
    #: The highest signature counter an assertion of this key reported so far (0: none, or a key without one).
    counter: int = 0


class _Approvals:
    """What the walk learned of passkeys and requests, and the check of each approval's assertions."""

    #: The receipt kinds this check reads (every other receipt is skipped unparsed).
    KINDS = frozenset(
        {"passkey_registered", "passkey_revoked", "person_removed", "hitl_requested"}
        | {"hitl_partial_approval", "hitl_decided"}
    )

    def __init__(self) -> None:
        self.keys: dict[str, _Enrolled] = {}
        self.requests: dict[str, Mapping[str, Any]] = {}
        self.nonces: dict[str, tuple[str, str]] = {}
        self.assertions = 0
        self.signatures_checked = True

    def see(self, seq: int, kind: str, payload: Any) -> str | None:
        """Learn from one receipt, or check its approvals; the problem found, if any."""
        try:
            return self._see(seq, kind, payload)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as exc:
            return f"the {kind} receipt's approval evidence is malformed ({type(exc).__name__})"

    def _see(self, seq: int, kind: str, p: Any) -> str | None:
        if kind == "passkey_registered" and "public_key" in p:
            self.keys[p["credential_id_sha256"]] = _Enrolled(p["person"], _unb64(p["public_key"]))
        elif kind in ("passkey_revoked", "person_removed"):
            for credential in [p.get("credential_id_sha256"), *p.get("credential_id_sha256s", [])]:
                if credential in self.keys and self.keys[credential].revoked_seq is None:
                    self.keys[credential].revoked_seq = seq
        elif kind == "hitl_requested":
            if "arguments" in p and sha256_hex(canonical(p["arguments"])) != p["arguments_sha256"]:
                return "the recorded arguments do not hash to the request's arguments_sha256"
            self.requests[p["request_id"]] = p
        elif kind == "hitl_partial_approval" and p.get("assertion") is not None:
            return self.check(seq, p["request_id"], p["decided_by"], p["assertion"])
        elif kind == "hitl_decided" and "proofs" in p:
            return self._decided(seq, p)
        return None

    def _decided(self, seq: int, p: Mapping[str, Any]) -> str | None:
        """Every approver's proof, N distinct keys and people for a quorum of N, the quorum the request asked."""
        request = self.requests.get(p["request_id"])
        if request is None:
            return f"request {p['request_id']} was decided but no hitl_requested receipt records it"
        if p["required_approvals"] != request["required_approvals"]:
            return "the decision's quorum differs from the one the request asked"
        if p["decision"] != "approved":
            return None
        proofs = p["proofs"]
        if [proof["person"] for proof in proofs] != list(p["approvers"]):
            return "the decision's proofs do not name its approvers"
        for proof in proofs:
            if (proof["via"] == "passkey") != (proof.get("assertion") is not None):
                return f"{proof['person']}'s approval via {proof['via']} does not match its assertion"
            if proof["via"] == "passkey":
                problem = self.check(seq, p["request_id"], proof["person"], proof["assertion"])
                if problem:
                    return problem
        signed = [proof["assertion"]["credential_id_sha256"] for proof in proofs if proof["via"] == "passkey"]
        if len(set(signed)) != len(signed):
            return "one passkey counted twice in the quorum"
        if len(set(p["approvers"])) < p["required_approvals"]:
            return f"{len(set(p['approvers']))} distinct approvers for a quorum of {p['required_approvals']}"
        return None

    def check(self, seq: int, request_id: str, person: str, a: Mapping[str, Any]) -> str | None:
        """One assertion: over this request's action, fresh, by ``person``'s enrolled, unrevoked key."""
        request = self.requests.get(request_id)
        if request is None:
            return f"an approval of request {request_id}, which no hitl_requested receipt records"
        action = a["action"]
        expected = {
            "tool": action_tool(request["kind"], request.get("provenance")),
            "arguments_sha256": request["arguments_sha256"],
            "server": action["server"],
            "request_id": request_id,
            "required_approvals": request["required_approvals"],
        }
        if dict(action) != expected:
            return f"{person}'s assertion is over another action than request {request_id}"
        problem = self._ceremony(a, action)
        if problem:
            return f"{person}'s assertion {problem}"
        # a quorum's final receipt repeats its partial approvals' assertions: the same nonce, request and person
        first = a["nonce"] not in self.nonces
        if self.nonces.setdefault(a["nonce"], (request_id, person)) != (request_id, person):
            return f"{person}'s assertion replays a nonce already used"
        return self._key(seq, person, a, first)

    def _ceremony(self, a: Mapping[str, Any], action: Mapping[str, Any]) -> str | None:
        """clientDataJSON and authenticatorData: a get over this challenge, at this origin, user verified."""
        client = json.loads(_unb64(a["client_data_json"]))
        if client.get("type") != "webauthn.get":
            return "is not a WebAuthn get"
        if client.get("challenge") != b64url(approval_challenge(action, a["nonce"])):
            return "was made for another challenge (action hash or nonce)"
        if client.get("origin") != action["server"]:
            return "was made at another origin than the server"
        data = _unb64(a["authenticator_data"])
        host = urlsplit(action["server"]).hostname or ""
        if data[:32] != hashlib.sha256(host.encode("utf-8")).digest():
            return "was made for another relying party"
        if data[32] & (_UP | _UV) != (_UP | _UV):
            return "was made without user presence and verification"
        return None

    def _key(self, seq: int, person: str, a: Mapping[str, Any], first: bool) -> str | None:
        """The assertion's key: enrolled before, by ``person``, not revoked by then; its signature; its
        counter past the key's last one (SEP-2672's clone check; a key that always says 0 has none)."""
        enrolled = self.keys.get(a["credential_id_sha256"])
        if enrolled is None:
            return f"{person}'s assertion names a passkey the chain never enrolled"
        if enrolled.person != person:
            return f"{person}'s assertion was made with {enrolled.person}'s passkey"
        if enrolled.revoked_seq is not None and enrolled.revoked_seq < seq:
            return f"{person}'s assertion was made with a passkey revoked at seq {enrolled.revoked_seq}"
        signed = _unb64(a["authenticator_data"]) + hashlib.sha256(_unb64(a["client_data_json"])).digest()
        verified = cose_verify(enrolled.public_key, signed, _unb64(a["signature"]))
        self.assertions += 1
        if verified is None:
            self.signatures_checked = False
        elif not verified:
            return f"{person}'s assertion has a signature that does not verify with the enrolled key"
        counter = int.from_bytes(_unb64(a["authenticator_data"])[33:37], "big")
        if first and counter:
            if counter <= enrolled.counter:
                return f"{person}'s passkey counter went back ({counter} after {enrolled.counter}): a cloned key?"
            enrolled.counter = counter
        return None


def sha256_hex(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# the walk


def checkpoint_problem(checkpoint: Mapping[str, Any], public_keys: Mapping[str, bytes]) -> str | None:
    """Why ``checkpoint`` cannot be trusted (malformed, unknown key, bad signature), or None when it verifies."""
    try:
        seq, sha256, at = checkpoint["seq"], checkpoint["sha256"], checkpoint["at"]
        key_id, signature = checkpoint["key_id"], bytes.fromhex(checkpoint["signature"])
    except (KeyError, TypeError, ValueError):
        return "a checkpoint is malformed"
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(sha256, str):
        return "a checkpoint is malformed"
    key = public_keys.get(key_id)
    if key is None:
        known = ", ".join(sorted(public_keys)) or "none"
        return (
            f"the checkpoint at seq {seq} is signed by key {key_id}, which is not trusted (trusted: {known})"
        )
    if not ed25519_verify(key, checkpoint_message(seq, sha256, str(at), str(key_id)), signature):
        return f"the checkpoint at seq {seq} has a signature that does not verify"
    return None


def _fail(
    count: int, prev: str, seq: int | None, reason: str, error_class: str = CHAIN_BROKEN
) -> ChainReport:
    return ChainReport(False, count, prev, seq, reason, error_class)


def verify_rows(
    rows: Iterable[Row],
    *,
    head: tuple[int, str] | None = None,
    checkpoints: Iterable[Mapping[str, Any]] = (),
    public_keys: Mapping[str, bytes] | None = None,
) -> ChainReport:
    """Recompute every hash, link and seq of ``rows`` (in chain order, read once, streamed), compare the
    last one with ``head`` (seq, sha256), and check every checkpoint's signature and that the chain still
    holds each checkpointed head at its seq."""
    anchors = _anchors(checkpoints, public_keys)
    if isinstance(anchors, ChainReport):
        return anchors
    walk = _Walk(anchors)
    for row in rows:
        failure = walk.step(row)
        if failure is not None:
            return failure
    return walk.end(head)


def _anchors(
    checkpoints: Iterable[Mapping[str, Any]], public_keys: Mapping[str, bytes] | None
) -> dict[int, str] | ChainReport:
    """Each signed checkpoint's sha256 by seq, or the failure of the first untrusted or disagreeing one."""
    anchors: dict[int, str] = {}
    for checkpoint in checkpoints:
        problem = (
            checkpoint_problem(checkpoint, public_keys or {})
            if isinstance(checkpoint, Mapping)
            else "a checkpoint is malformed"
        )
        if problem:
            seq = checkpoint.get("seq") if isinstance(checkpoint, Mapping) else None
            return _fail(0, GENESIS_SHA256, seq, problem, CHECKPOINT_INVALID)
        seq, sha256 = checkpoint["seq"], checkpoint["sha256"]
        if anchors.setdefault(seq, sha256) != sha256:
            return _fail(
                0, GENESIS_SHA256, seq, "two signed checkpoints disagree at this seq", CHECKPOINT_MISMATCH
            )
    return anchors


class _Walk:
    """The chain read so far: the last receipt's sha256 and seq, and the checkpoints it must meet."""

    def __init__(self, anchors: dict[int, str]) -> None:
        self.anchors = anchors
        self.prev: str = GENESIS_SHA256
        self.count: Any = 0
        #: Each subagent's link as spawned (most receipts carry no delegation: they are not parsed).
        self.delegations = Ledger()
        self.approvals = _Approvals()

    def step(self, row: Row) -> ChainReport | None:
        """Check one receipt's seq, payload, link, digest and anchor, and move past it; the failure if any."""
        seq, kind, at, payload, prev_sha256, sha256 = row
        count, prev = self.count, self.prev
        expected = count + 1
        if seq != expected or isinstance(seq, bool):
            bad = seq if isinstance(seq, int) and not isinstance(seq, bool) else expected
            return _fail(count, prev, bad, f"sequence gap: expected {expected}, found {seq}")
        text = _payload_text(payload)
        if not isinstance(text, str):
            return _fail(count, prev, seq, text.reason)
        if prev_sha256 != prev:
            return _fail(count, prev, seq, "prev_sha256 does not match the previous receipt")
        body = (
            f'{{"at":{canonical(at)},"kind":{canonical(kind)},"payload":{text},'
            f'"prev_sha256":{canonical(prev_sha256)},"seq":{seq}}}'
        )
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        if digest != sha256:
            return _fail(count, prev, seq, "sha256 does not match the receipt's content")
        widens = self.delegations.check(kind, json.loads(text)) if '"delegation":' in text else None
        if widens is not None:
            return _fail(count, prev, seq, widens, DELEGATION_WIDENS)
        anchored = self.anchors.get(seq)
        if anchored is not None and anchored != digest:
            reason = "the chain differs from the signed checkpoint at this seq (rewritten history)"
            return _fail(count, prev, seq, reason, CHECKPOINT_MISMATCH)
        if isinstance(kind, str) and kind in _Approvals.KINDS:
            problem = self.approvals.see(seq, kind, json.loads(text))
            if problem is not None:
                return _fail(count, prev, seq, problem, APPROVAL_INVALID)
        self.prev, self.count = digest, seq
        return None

    def end(self, head: tuple[int, str] | None) -> ChainReport:
        """No checkpoint may lie past the last receipt, and the last receipt must be the stored head."""
        anchors, count, prev = self.anchors, self.count, self.prev
        if anchors and max(anchors) > count:
            reason = f"a signed checkpoint covers seq {max(anchors)} but the chain ends at seq {count} (receipts removed)"
            return _fail(count, prev, max(anchors), reason, CHECKPOINT_MISMATCH)
        if head is not None and (head[1] != prev or head[0] != count):
            return _fail(count, prev, None, "the chain head does not match the last receipt")
        return ChainReport(
            True,
            count,
            prev,
            checkpoints=len(anchors),
            anchored_seq=max(anchors, default=0),
            assertions=self.approvals.assertions,
            signatures_checked=self.approvals.signatures_checked,
        )


@dataclass(frozen=True)
class _Unhashable:
    """Why a stored payload cannot be hashed as it stands."""

    reason: str


def _payload_text(payload: Any) -> str | _Unhashable:
    """The canonical JSON a receipt's payload is hashed as; stored text must already be exactly that."""
    if isinstance(payload, str):
        try:
            text = canonical(json.loads(payload))
        except ValueError:
            return _Unhashable("the payload is not valid JSON")
        if text != payload:
            return _Unhashable("the stored payload is not the canonical JSON of its value (duplicate keys?)")
        return text
    return canonical(payload)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def parse_strict(text: str) -> Any:
    """JSON with duplicate object keys refused (they would hash as one key and hide the other)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)


def dict_rows(rows: Iterable[Mapping[str, Any]]) -> Iterator[Row]:
    """Exported receipts (``{seq, kind, at, payload, prev_sha256, sha256}``) as walk rows."""
    for row in rows:
        if not isinstance(row, Mapping):
            row = {}  # not a receipt: fails as a sequence gap at its position
        yield (
            row.get("seq"),
            row.get("kind"),
            row.get("at"),
            row.get("payload"),
            row.get("prev_sha256"),
            row.get("sha256"),
        )


def read_jsonl(path: Path) -> Iterator[Any]:
    """Each non-empty line of a JSON Lines file, parsed strictly (streamed)."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield parse_strict(line)


def verify_export(directory: Path, public_key: bytes) -> ChainReport:
    """Check an export (``receipts.jsonl`` and ``checkpoints.jsonl``) with nothing but the public key."""
    keys = {public_key_id(public_key): public_key}
    checkpoints_path = directory / "checkpoints.jsonl"
    try:
        checkpoints = list(read_jsonl(checkpoints_path)) if checkpoints_path.is_file() else []
    except (OSError, ValueError) as exc:
        return _fail(0, GENESIS_SHA256, None, f"checkpoints.jsonl is unreadable ({exc})", CHECKPOINT_INVALID)
    try:
        return verify_rows(
            dict_rows(read_jsonl(directory / "receipts.jsonl")), checkpoints=checkpoints, public_keys=keys
        )
    except (OSError, ValueError) as exc:
        return _fail(0, GENESIS_SHA256, None, f"receipts.jsonl is unreadable ({exc})")


def main(argv: list[str] | None = None) -> int:
    """``python -m baton.chain_verify DIR --public-key FILE``: exit 0 when the export verifies."""
    args = sys.argv[1:] if argv is None else argv
    witness = _witness_options(args[3:])
    if len(args) < 3 or args[1] != "--public-key" or witness is None:
        sys.stderr.write(
            "usage: python -m baton.chain_verify EXPORT_DIR --public-key checkpoint.pub "
            "[--witness-key witness.vkey [--witness-checkpoint FILE]]\n"
        )
        return 2
    try:
        key = read_public_key(Path(args[2]))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"{CHECKPOINT_INVALID}: the public key could not be read ({exc})\n")
        return 1
    report = verify_export(Path(args[0]), key)
    if not report.ok:
        sys.stderr.write(f"{report.error_class}: at seq {report.first_bad_seq}: {report.reason}\n")
        return 1
    if witness and (problem := _witness_problem(Path(args[0]), witness)):
        sys.stderr.write(f"{problem}\n")
        return 1
    sys.stdout.write(
        f"ok: {report.count} receipts, head {report.head_sha256}; {report.checkpoints} signed checkpoints "
        f"verified, anchored up to seq {report.anchored_seq}\n"
    )
    if report.assertions:
        sys.stdout.write(approvals_line(report) + "\n")
    return 0


def _witness_options(args: list[str]) -> dict[str, str] | None:
    """``--witness-key FILE [--witness-checkpoint FILE]`` as a dict ({} without them, None when malformed)."""
    options = dict(zip(args[::2], args[1::2], strict=False))
    if len(args) % 2 or not set(options) <= {"--witness-key", "--witness-checkpoint"}:
        return None
    return options if not options or "--witness-key" in options else None


def _witness_problem(directory: Path, options: dict[str, str]) -> str | None:
    """The witness hook (``baton.witness_verify``): the export must hold every head the pinned witness cosigned."""
    try:
        from baton import witness_verify
    except ImportError:  # this file copied alone: witness_verify.py copied beside it
        import witness_verify  # type: ignore[import-not-found, no-redef]

    try:
        key = witness_verify.parse_vkey(Path(options["--witness-key"]).read_text(encoding="utf-8"))
        latest_path = options.get("--witness-checkpoint")
        latest = Path(latest_path).read_text(encoding="utf-8") if latest_path else None
        problem = witness_verify.witnessed_problem(directory, key, ed25519_verify, latest)
    except (OSError, ValueError) as exc:
        problem = f"the witness material could not be read ({exc})"
    return None if problem is None else f"{witness_verify.WITNESS_ROLLBACK}: {problem}"


def approvals_line(report: ChainReport) -> str:
    """What the verifier says of the approvals' assertions, and whether their signatures were checked."""
    line = f"approvals: {report.assertions} passkey assertions checked against their enrolled keys"
    if not report.signatures_checked:
        return f"{line}; {SIGNATURES_UNCHECKED} (ES256 and RS256 need it: pip install cryptography)"
    return f"{line}; signatures checked (cryptography)"


if __name__ == "__main__":
    raise SystemExit(main())
