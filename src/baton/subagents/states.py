"""A subagent's statuses, and which of them are still active or terminal."""

from __future__ import annotations

from typing import Literal

Status = Literal["queued", "running", "completed", "failed", "cancelled"]
#: Work is queued or under way: a new turn must wait, a cancel or an orphan recovery can end it.
ACTIVE: tuple[str, ...] = ("queued", "running")
#: The conversation is over: no further turn can be added.
TERMINAL: tuple[str, ...] = ("failed", "cancelled")
