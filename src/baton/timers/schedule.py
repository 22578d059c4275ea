"""Timer inputs: schedules and actions, validated into typed values (no store, no MCP)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from baton import clock
from baton.errors import TimerError

#: The shortest repetition accepted; anything faster would be a busy loop, not a timer.
MIN_INTERVAL_SECONDS = 0.1


def now_utc() -> datetime:
    """The current time, timezone-aware in UTC."""
    return clock.now()


def format_time(moment: datetime) -> str:
    """Fixed-width ISO 8601 in UTC with microseconds, so stored times compare as strings."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> datetime:
    """A stored time back into an aware datetime."""
    return datetime.fromisoformat(text)


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NotifyAction(_Action):
    """Send ``message`` on a notification ``channel`` (email, telegram, slack, discord, webhook)."""

    kind: Literal["notify"]
    channel: str = Field(min_length=1, max_length=64)
    message: str = Field(min_length=1, max_length=20_000)


class SpawnSubagentAction(_Action):
    """Spawn an async subagent with ``task`` and ``role``."""

    kind: Literal["spawn_subagent"]
    task: str = Field(min_length=1, max_length=50_000)
    role: str = Field("assistant", min_length=1, max_length=200)


class RecordAction(_Action):
    """Only write the firing receipt."""

    kind: Literal["record"]


Action = Annotated[NotifyAction | SpawnSubagentAction | RecordAction, Field(discriminator="kind")]
_ACTION = TypeAdapter[NotifyAction | SpawnSubagentAction | RecordAction](Action)
ACTION_KINDS = ("notify", "spawn_subagent", "record")


def parse_action(raw: Any) -> NotifyAction | SpawnSubagentAction | RecordAction:
    """Validate an action object; anything unknown or malformed is ``timer_action_invalid``."""
    if not isinstance(raw, dict):
        raise TimerError("timer_action_invalid", "The action must be an object with a kind.")
    if raw.get("kind") not in ACTION_KINDS:
        raise TimerError(
            "timer_action_invalid",
            f"The action kind must be one of {', '.join(ACTION_KINDS)}.",
            kinds=list(ACTION_KINDS),
        )
    try:
        return _ACTION.validate_python(raw)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"][1:]) or "action", "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        fields = ", ".join(problem["field"] for problem in problems)
        raise TimerError(
            "timer_action_invalid", f"The {raw['kind']} action is malformed: {fields}.", problems=problems
        ) from None


@dataclass(frozen=True)
class Schedule:
    """When a timer first fires and, for a repeating one, its period."""

    first_fire_at: datetime
    interval_seconds: float | None = None

    @property
    def kind(self) -> Literal["once", "interval"]:
        """``once`` or ``interval``."""
        return "once" if self.interval_seconds is None else "interval"


def parse_schedule(
    fire_at: str | None, delay_seconds: float | None, interval_seconds: float | None, now: datetime
) -> Schedule:
    """Exactly one of ``fire_at`` / ``delay_seconds`` / ``interval_seconds``, in the future and positive."""
    given = [name for name, value in _named(fire_at, delay_seconds, interval_seconds) if value is not None]
    if len(given) != 1:
        raise TimerError(
            "timer_schedule_invalid",
            "Give exactly one of fire_at, delay_seconds or interval_seconds"
            + (f" (got {', '.join(given)})." if given else "."),
        )
    try:
        if fire_at is not None:
            return Schedule(_future_instant(fire_at, now))
        if delay_seconds is not None:
            return Schedule(now + timedelta(seconds=_positive("delay_seconds", delay_seconds, 0.0)))
        assert interval_seconds is not None
        period = _positive("interval_seconds", interval_seconds, MIN_INTERVAL_SECONDS)
        return Schedule(now + timedelta(seconds=period), interval_seconds=period)
    except OverflowError:
        raise TimerError("timer_schedule_invalid", "The schedule is too far in the future.") from None


def next_after(due: datetime, interval_seconds: float, now: datetime) -> tuple[datetime, int]:
    """The next due time on the interval's grid strictly after ``now``, and how many repetitions it skips."""
    behind = max((now - due).total_seconds(), 0.0)
    steps = math.floor(behind / interval_seconds) + 1
    upcoming = due + timedelta(seconds=steps * interval_seconds)
    while upcoming <= now:  # float rounding at an exact boundary
        steps += 1
        upcoming = due + timedelta(seconds=steps * interval_seconds)
    return upcoming, steps - 1


def _named(*values: Any) -> list[tuple[str, Any]]:
    return list(zip(("fire_at", "delay_seconds", "interval_seconds"), values, strict=True))


def _future_instant(text: str, now: datetime) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimerError(
            "timer_schedule_invalid", "fire_at is not an ISO 8601 date-time (e.g. 2026-01-31T09:00:00Z)."
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TimerError(
            "timer_schedule_invalid",
            "fire_at has no time zone; add Z or an offset such as +08:00 (naive times are ambiguous).",
        )
    if moment <= now:
        raise TimerError(
            "timer_schedule_invalid", "fire_at is in the past.", now=format_time(now), fire_at=text
        )
    return moment.astimezone(UTC)


def _positive(name: str, value: float, minimum: float) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise TimerError("timer_schedule_invalid", f"{name} must be a positive number of seconds.")
    if number < minimum:
        raise TimerError("timer_schedule_invalid", f"{name} must be at least {minimum} seconds.")
    return number
