"""Opaque list cursors (``mcp_list_subagents``, ``mcp_list_timers``): the (created_at, id) of a page's last row."""

from __future__ import annotations

import base64
import binascii
import json

from baton.errors import ArgumentError


def encode_cursor(created_at: str, row_id: str) -> str:
    """The cursor that continues a list after the row ``(created_at, row_id)``."""
    raw = json.dumps([created_at, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[str, str] | None:
    """``(created_at, id)`` from a cursor; a malformed one is ``invalid_arguments``."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, last_id = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise ArgumentError("invalid_arguments", "The cursor is not one this server gave.") from None
    if not isinstance(created, str) or not isinstance(last_id, str):
        raise ArgumentError("invalid_arguments", "The cursor is not one this server gave.")
    return created, last_id
