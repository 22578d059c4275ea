"""The redactor's serialized pre-check never lets a secret through that the full walk would redact."""

from __future__ import annotations

import random
from typing import Any

from baton.evidence.redaction import REDACTED, Redactor

SECRETS = ("sk-live-0123456789abcdef", "supersecretpassword", "42")
PIECES = (
    "plain",
    "sk-live-0123456789abcdef",
    "before\nsk-abcdefghijklmnop after",
    "\tghp_notacredential-but-close",
    "ghp-ABCDEFGHIJKLMNOP",
    "x supersecretpassword y",
    "42",
    "420",
    'quote " and \\ backslash',
    "é unicode ☃",
)


def nested(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-shaped value built from the pieces above (keys included)."""
    kind = rng.randrange(4 if depth < 4 else 2)
    if kind == 0:
        return rng.choice(PIECES)
    if kind == 1:
        return rng.choice([1, 2.5, None, True, 42])
    if kind == 2:
        return [nested(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(PIECES): nested(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_the_pre_check_agrees_with_the_full_walk_on_random_values() -> None:
    redactor = Redactor(SECRETS)
    rng = random.Random(1234)
    for _ in range(3000):
        value = nested(rng)
        assert redactor.value(value) == redactor._walk(value), value


def test_a_clean_value_is_returned_without_a_copy_and_a_dirty_one_is_redacted() -> None:
    redactor = Redactor(SECRETS)
    clean = {"tool": "mcp_ping", "items": [1, "two"]}
    assert redactor.value(clean) is clean
    dirty = {"note": ["ok", {"key": "token sk-live-0123456789abcdef"}], "42": "42"}
    assert redactor.value(dirty) == {"note": ["ok", {"key": f"token {REDACTED}"}], REDACTED: REDACTED}


def test_a_secret_json_would_escape_turns_the_pre_check_off() -> None:
    redactor = Redactor(('pass"word-with-quote',))
    value = {"a": 'x pass"word-with-quote y'}
    assert redactor.value(value) == {"a": f"x {REDACTED} y"}
