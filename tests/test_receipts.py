"""The receipt chain: canonical hashing, verification, tamper detection, redaction and the credential guard."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, update

from baton.errors import ReceiptError
from baton.evidence.receipts import (
    GENESIS_SHA256,
    ReceiptLog,
    Redactor,
    canonical_json,
    receipt_digest,
    sha256_hex,
)
from baton.store.engine import Store
from baton.store.schema import receipt_head, receipts


@pytest.fixture
def log(tmp_path) -> ReceiptLog:
    return ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor(("super-secret-value-123",)))


def test_canonical_json_is_sorted_compact_and_unicode() -> None:
    assert canonical_json({"b": 1, "a": "é", "c": [1, {"z": 0, "y": None}]}) == (
        '{"a":"é","b":1,"c":[1,{"y":null,"z":0}]}'
    )


def test_each_receipt_hashes_its_canonical_body_and_links_to_the_previous(log: ReceiptLog) -> None:
    first = log.append("test", {"n": 1})
    second = log.append("test", {"n": 2})
    assert first.seq == 1
    assert first.prev_sha256 == GENESIS_SHA256
    assert second.prev_sha256 == first.sha256
    body = {"seq": 2, "kind": "test", "at": second.at, "payload": {"n": 2}, "prev_sha256": first.sha256}
    assert second.sha256 == sha256_hex(canonical_json(body))
    assert second.sha256 == receipt_digest(2, "test", second.at, {"n": 2}, first.sha256)
    report = log.verify()
    assert report.ok
    assert report.count == 2
    assert report.head_sha256 == second.sha256


def test_a_changed_payload_is_detected(log: ReceiptLog) -> None:
    for n in range(3):
        log.append("test", {"n": n})
    with log.store.write() as connection:
        connection.execute(update(receipts).where(receipts.c.seq == 2).values(payload=json.dumps({"n": 99})))
    report = log.verify()
    assert not report.ok
    assert report.first_bad_seq == 2


def test_a_deleted_last_receipt_is_detected_by_the_head(log: ReceiptLog) -> None:
    for n in range(3):
        log.append("test", {"n": n})
    with log.store.write() as connection:
        connection.execute(delete(receipts).where(receipts.c.seq == 3))
    report = log.verify()
    assert not report.ok
    assert "head" in (report.reason or "")


def test_a_deleted_middle_receipt_is_a_sequence_gap(log: ReceiptLog) -> None:
    for n in range(3):
        log.append("test", {"n": n})
    with log.store.write() as connection:
        connection.execute(delete(receipts).where(receipts.c.seq == 2))
        connection.execute(update(receipt_head).values(seq=3))
    report = log.verify()
    assert not report.ok
    assert report.first_bad_seq == 3


def test_configured_secrets_and_credential_shapes_are_redacted_before_writing(log: ReceiptLog) -> None:
    receipt = log.append(
        "test",
        {
            "note": "key super-secret-value-123 and sk-abcdefghijklmnop1234 and ghp-ABCDEFGHIJKLMNOP",
            "super-secret-value-123": "as a key too",
        },
    )
    text = canonical_json(receipt.payload)
    assert "super-secret-value-123" not in text
    assert "sk-abcdefghijklmnop1234" not in text
    assert "ghp-ABCDEFGHIJKLMNOP" not in text
    assert text.count("[REDACTED]") == 4
    assert log.verify().ok


def test_short_sensitive_values_are_only_redacted_as_whole_strings() -> None:
    redactor = Redactor(("0",))
    assert redactor.value({"chat_id": "0", "count": "10 items"}) == {
        "chat_id": "[REDACTED]",
        "count": "10 items",
    }


def test_the_guard_refuses_text_that_still_holds_a_credential() -> None:
    redactor = Redactor(("super-secret-value-123",))
    with pytest.raises(ReceiptError) as caught:
        redactor.guard('{"x":"sk-abcdefghijklmnop1234"}', "a file")
    assert caught.value.error_class == "receipt_contains_secret"
    redactor.guard('{"x":"[REDACTED]"}', "a file")
