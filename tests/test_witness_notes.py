"""The signed-note format against the example the C2SP spec publishes (c2sp.org/signed-note, "Example",
C2SP/C2SP signed-note.md at 5ba5ee8): baton's stdlib reader verifies it and refuses it altered."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from baton.chain_verify import ed25519_verify, ed25519_verify_pure
from baton.witness_verify import parse_vkey, signed_by

SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n"
    "\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


@pytest.mark.parametrize("verify", [ed25519_verify, ed25519_verify_pure])
def test_the_spec_example_note_verifies_with_its_verifier_key(
    verify: Callable[[bytes, bytes, bytes], bool],
) -> None:
    key = parse_vkey(SPEC_VKEY)
    assert key.encode() == SPEC_VKEY
    assert signed_by(SPEC_NOTE, key, verify)
    assert not signed_by(SPEC_NOTE.replace("example message", "example massage"), key, verify)


def test_a_verifier_key_whose_id_does_not_match_is_refused() -> None:
    with pytest.raises(ValueError, match="key ID does not match"):
        parse_vkey(SPEC_VKEY.replace("+530d903a+", "+530d903b+"))
