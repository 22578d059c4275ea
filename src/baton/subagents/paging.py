"""Opaque cursors for ``mcp_list_subagents``: the (created_at, id) of the last row of a page."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from baton.errors import ArgumentError


def encode_cursor(row: dict[str, Any]) -> str:
    """The cursor that continues a list after ``row``."""
    raw = json.dumps([row["created_at"], row["subagent_id"]], separators=(",", ":")).encode()
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
