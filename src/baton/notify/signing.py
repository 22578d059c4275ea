"""Standard Webhooks signatures on baton's own posts to HITL_WEBHOOK_URL.

An agent may post any JSON to the operator's webhook (``mcp_send_webhook``), so a receiver that acts on
baton's announcements needs to tell them apart. With ``HITL_WEBHOOK_SECRET=whsec_<base64>`` set, baton's own
posts carry ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256 of
"id.timestamp.body">`` (https://www.standardwebhooks.com); an agent's payloads are never signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from baton.errors import ConfigError

PREFIX = "whsec_"


def signing_key(secret: str | None) -> bytes | None:
    """The key bytes of a ``whsec_<base64>`` secret, or None when none is set; a malformed one fails closed."""
    if not secret:
        return None
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not secret.startswith(PREFIX) or len(key) < 24:
        raise ConfigError(
            "config_invalid",
            "HITL_WEBHOOK_SECRET must be whsec_ followed by at least 24 bytes of base64 "
            '(e.g. `python -c \'import base64,secrets; print("whsec_" + '
            "base64.b64encode(secrets.token_bytes(32)).decode())'`).",
            variables=["HITL_WEBHOOK_SECRET"],
        )
    return key


def message_id() -> str:
    """A fresh ``webhook-id`` (kept across the retries of one message, so a receiver can drop duplicates)."""
    return f"msg_{secrets.token_urlsafe(18)}"


def signature_headers(key: bytes, msg_id: str, timestamp: int, body: bytes) -> list[tuple[bytes, bytes]]:
    """The three Standard Webhooks headers of one attempt."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return [
        (b"webhook-id", msg_id.encode("ascii")),
        (b"webhook-timestamp", str(timestamp).encode("ascii")),
        (b"webhook-signature", f"v1,{digest}".encode("ascii")),
    ]
