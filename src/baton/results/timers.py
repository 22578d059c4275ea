"""Results of the timer tools: a timer as set or cancelled, and the list of timers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from baton.results.base import Ok, Result


class LastFiring(Result):
    due_at: str
    fired_at: str | None
    fired_by: str | None
    missed: bool
    outcome: str | None
    error_class: str | None


class Timer(Result):
    timer_id: str
    name: str
    schedule: Literal["once", "interval"]
    interval_seconds: float | None
    action: dict[str, Any] = Field(description="The action as set.")
    status: Literal["active", "completed", "cancelled"]
    next_fire_at: str | None
    first_fire_at: str
    fire_count: int
    created_at: str
    cancelled_at: str | None
    last_firing: LastFiring | None
    agent: str | None = None


class TimerResult(Timer):
    success: Literal[True]


class SkippedTimer(Result):
    """A stored timer left out of a list because a value in its row is corrupted."""

    timer_id: str
    reason: str = Field(description="The unreadable field (never its value).")


class TimerList(Ok):
    timers: list[Timer]
    count: int
    truncated: bool = Field(description="True when more pages follow.")
    next_cursor: str | None = Field(description="The next page's cursor.")
    skipped: list[SkippedTimer] = Field(default_factory=list, description="Unreadable timers, left out.")
