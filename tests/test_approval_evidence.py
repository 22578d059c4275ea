"""The standalone verifier's approval checks on chains made here, signed with a real Ed25519 passkey key: an
EdDSA assertion verifies without ``cryptography`` (the module's own Ed25519), and hostile evidence is a typed
``receipt_approval_invalid``, never a traceback. (The browser-made assertions, ES256 and EdDSA, and every
edit of them: ``tests/hitl/test_signed_approvals_browser.py``.)"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from baton.chain_verify import approval_challenge, b64url, canonical
from tests.hitl.chain_tamper import write_rechained

ORIGIN = "https://baton.example"
ARGUMENTS = {"to": "acme", "amount": 250}
ARGUMENTS_SHA256 = hashlib.sha256(canonical(ARGUMENTS).encode()).hexdigest()
CREDENTIAL = "c" * 64


def _cose(key: Ed25519PrivateKey) -> bytes:
    """The COSE_Key of an Ed25519 public key: {1: 1 (OKP), 3: -8 (EdDSA), -1: 6 (Ed25519), -2: x}."""
    x = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return bytes([0xA4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20]) + x


def _assertion(
    key: Ed25519PrivateKey, nonce: str, request_id: str = "hr_1", counter: int = 7
) -> dict[str, Any]:
    action = {
        "tool": "baton.hitl.approval",
        "arguments_sha256": ARGUMENTS_SHA256,
        "server": ORIGIN,
        "request_id": request_id,
        "required_approvals": 1,
    }
    client = json.dumps(
        {"type": "webauthn.get", "challenge": b64url(approval_challenge(action, nonce)), "origin": ORIGIN}
    ).encode()
    authenticator = hashlib.sha256(b"baton.example").digest() + bytes([0x05]) + counter.to_bytes(4, "big")
    signature = key.sign(authenticator + hashlib.sha256(client).digest())
    return {
        "action": action,
        "nonce": nonce,
        "credential_id_sha256": CREDENTIAL,
        "authenticator_data": b64url(authenticator),
        "client_data_json": b64url(client),
        "signature": b64url(signature),
    }


def _request(request_id: str, proof: Any) -> list[dict[str, Any]]:
    """A request's ``hitl_requested`` and its approval's ``hitl_decided`` carrying ``proof``."""
    at = "2026-12-06T00:00:00+00:00"
    requested = {
        "request_id": request_id,
        "kind": "approval",
        "provenance": None,
        "arguments": ARGUMENTS,
        "arguments_sha256": ARGUMENTS_SHA256,
        "required_approvals": 1,
    }
    decided = {
        "request_id": request_id,
        "decision": "approved",
        "required_approvals": 1,
        "approvers": ["ana"],
    }
    return [
        {"kind": "hitl_requested", "at": at, "payload": requested},
        {"kind": "hitl_decided", "at": at, "payload": {**decided, "proofs": proof}},
    ]


def _chain(key: Ed25519PrivateKey, proof: Any, public_key: Any = None) -> list[dict[str, Any]]:
    at = "2026-12-06T00:00:00+00:00"
    enrolled = {
        "person": "ana",
        "credential_id_sha256": CREDENTIAL,
        "public_key": public_key or b64url(_cose(key)),
    }
    requested = {
        "request_id": "hr_1",
        "kind": "approval",
        "provenance": None,
        "arguments": ARGUMENTS,
        "arguments_sha256": ARGUMENTS_SHA256,
        "required_approvals": 1,
    }
    decided = {"request_id": "hr_1", "decision": "approved", "required_approvals": 1, "approvers": ["ana"]}
    return [
        {"kind": "passkey_registered", "at": at, "payload": enrolled},
        {"kind": "hitl_requested", "at": at, "payload": requested},
        {"kind": "hitl_decided", "at": at, "payload": {**decided, "proofs": proof}},
    ]


def _verify(tmp_path: Path, rows: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """``python -m baton.chain_verify`` on ``rows`` with ``cryptography`` unimportable."""
    export = tmp_path / "export"
    export.mkdir()
    write_rechained(export, rows)
    public = tmp_path / "checkpoint.pub"
    public.write_text("00" * 32)  # no checkpoint to check: any key
    blocked = "import runpy, sys; sys.modules['cryptography'] = None; runpy.run_module('baton.chain_verify', run_name='__main__')"
    return subprocess.run(
        [sys.executable, "-c", blocked, str(export), "--public-key", str(public)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin"},
    )


def test_an_eddsa_assertion_verifies_with_the_standard_library_alone(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    done = _verify(
        tmp_path, _chain(key, [{"person": "ana", "via": "passkey", "assertion": _assertion(key, "n1")}])
    )
    assert done.returncode == 0, done.stderr
    assert "1 passkey assertions checked against their enrolled keys; signatures checked" in done.stdout


def test_a_passkey_counter_that_goes_back_is_a_cloned_key(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    rows = _chain(key, [{"person": "ana", "via": "passkey", "assertion": _assertion(key, "n1", counter=7)}])
    later = _assertion(key, "n2", "hr_2", counter=7)  # a copy of the key, signing from the same count
    rows += _request("hr_2", [{"person": "ana", "via": "passkey", "assertion": later}])
    done = _verify(tmp_path, rows)
    assert done.returncode == 1
    assert "ana's passkey counter went back (7 after 7)" in done.stderr


def test_an_assertion_signed_by_another_key_fails_without_cryptography_too(tmp_path: Path) -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    proof = [{"person": "ana", "via": "passkey", "assertion": _assertion(other, "n1")}]
    done = _verify(tmp_path, _chain(key, proof))
    assert done.returncode == 1
    assert done.stderr.startswith("receipt_approval_invalid: at seq 3: ana's assertion has a signature")


@pytest.mark.parametrize(
    ("proofs", "public_key"),
    [
        ("not a list", None),
        ([{"person": "ana", "via": "passkey", "assertion": "a string"}], None),
        ([{"person": "ana", "via": "passkey", "assertion": {"action": [1], "nonce": 5}}], None),
        ([{"person": "ana", "via": "passkey"}], None),
        (None, "!!not base64!!"),
        (None, b64url(bytes([0x81]) * 5000)),  # arrays nested 5,000 deep
        (None, b64url(bytes([0xBF]))),  # an indefinite-length map: not COSE
    ],
)
def test_hostile_approval_evidence_is_a_typed_failure(tmp_path: Path, proofs: Any, public_key: Any) -> None:
    key = Ed25519PrivateKey.generate()
    if proofs is None:
        proofs = [{"person": "ana", "via": "passkey", "assertion": _assertion(key, "n1")}]
    done = _verify(tmp_path, _chain(key, proofs, public_key))
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("receipt_approval_invalid: at seq "), done.stderr
    assert "Traceback" not in done.stderr
