"""What counts as loopback is one definition: the bind rules, the login throttle and plaintext SMTP
(``baton.http.addresses``) agree with the public address and the passkeys' origin
(``baton.identity.public_url``) on every spelling. Two copies had drifted: the bind rules refused
``LOCALHOST`` and ``ip6-localhost`` that the links treated as this machine."""

from __future__ import annotations

import pytest

from baton.http.addresses import is_loopback
from baton.identity.public_url import loopback

LOOPBACK = ["localhost", "LOCALHOST", "localhost.", "ip6-localhost", "127.0.0.1", "127.9.9.9", "::1", "[::1]"]
ELSEWHERE = ["0.0.0.0", "::", "example.com", "localhost.example.com", "10.0.0.1", "192.168.1.2", ""]


@pytest.mark.parametrize("host", LOOPBACK)
def test_every_loopback_spelling_counts_for_binds_and_links_alike(host: str) -> None:
    assert is_loopback(host) and loopback(host)


@pytest.mark.parametrize("host", ELSEWHERE)
def test_no_other_address_counts_for_either(host: str) -> None:
    assert not is_loopback(host) and not loopback(host)
