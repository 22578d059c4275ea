"""Canonical bytes, then hash (SPEC.md section 4): the one serialization every hash in baton covers."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

#: Built once: ``json.dumps`` with these options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """The one serialization every hash in baton covers."""
    return _ENCODER.encode(value)


def sha256_hex(data: str | bytes) -> str:
    """Hex sha256 of text (UTF-8) or bytes."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def utc_now() -> str:
    """The current UTC time in ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat()


def iso(epoch: float) -> str:
    """ISO 8601 UTC with microseconds, fixed width (stored strings sort by time)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds")
