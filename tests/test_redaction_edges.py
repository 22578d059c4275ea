"""Redaction at its edges (these tests kill the mutants mutmut found surviving in baton/evidence/redaction.py)."""

from __future__ import annotations

import pytest

from baton.errors import ReceiptError
from baton.evidence.redaction import MIN_SUBSTRING_SECRET, REDACTED, Redactor


def test_a_secret_of_exactly_the_minimum_length_is_redacted_inside_text() -> None:
    secret = "s3cr3tXY"
    assert len(secret) == MIN_SUBSTRING_SECRET
    redactor = Redactor((secret,))
    assert redactor.text(f"key={secret};") == f"key={REDACTED};"
    assert redactor.leaks(f'{{"k": "key={secret}"}}')


def test_lists_and_tuples_are_redacted_item_by_item() -> None:
    redactor = Redactor(("longsecret-42",))
    assert redactor.value(["a longsecret-42 b", "plain", 3]) == [f"a {REDACTED} b", "plain", 3]
    assert redactor.value(("longsecret-42",)) == [REDACTED]


def test_a_refused_write_says_what_it_refused() -> None:
    with pytest.raises(ReceiptError) as refused:
        Redactor(("longsecret-42",)).guard("x longsecret-42", "the timer mirror")
    assert refused.value.error_class == "receipt_contains_secret"
    assert "the timer mirror" in refused.value.message
