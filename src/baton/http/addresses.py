"""Network addresses: what counts as loopback (for HTTP binds, the login throttle and plaintext SMTP).

The one definition is :func:`baton.identity.public_url.loopback`, which the public address (and so every
link and the passkeys' origin) uses too: ``localhost`` in any case, ``localhost.``, ``ip6-localhost``,
127.0.0.0/8 and ``::1``. Two copies had drifted apart (one knew only a lower-case ``localhost``).
"""

from __future__ import annotations

from baton.identity.public_url import loopback as is_loopback

__all__ = ["is_loopback"]
