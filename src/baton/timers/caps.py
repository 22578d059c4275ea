"""Caps that keep timers from running away (docs/configuration.md, "Limits").

* at most ``BATON_TIMER_MAX_ACTIVE`` active timers per agent, and ``BATON_TIMER_MAX_ACTIVE_TOTAL`` in the
  store (``timer_limit_reached``);
* a minimum interval per action kind: ``record`` ``BATON_TIMER_MIN_INTERVAL_SECONDS``, ``notify``
  ``BATON_TIMER_MIN_NOTIFY_INTERVAL_SECONDS``, ``spawn_subagent`` ``BATON_TIMER_MIN_SPAWN_INTERVAL_SECONDS``
  (``timer_schedule_invalid`` with ``reason="interval_below_minimum"``);
* at most ``BATON_TIMER_SPAWNS_PER_HOUR`` subagents started by timer firings per server process in
  any sliding hour; a firing over the rate fails with ``timer_limit_reached`` (``reason="spawn_rate"``)
  and the timer carries on.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from sqlalchemy import func, select

from baton import clock
from baton.errors import TimerError
from baton.runtime import Runtime
from baton.store.schema import timers

SPAWN_WINDOW_SECONDS = 3600.0


def minimum_interval(settings: Any, action_kind: str) -> float:
    """The smallest repeat interval allowed for an action of ``action_kind``."""
    if action_kind == "spawn_subagent":
        return float(settings.baton_timer_min_spawn_interval_seconds)
    if action_kind == "notify":
        return float(settings.baton_timer_min_notify_interval_seconds)
    return float(settings.baton_timer_min_interval_seconds)


def check_interval(settings: Any, action_kind: str, interval_seconds: float | None) -> None:
    """Refuse a repeating timer faster than its action kind allows."""
    if interval_seconds is None:
        return
    minimum = minimum_interval(settings, action_kind)
    if interval_seconds < minimum:
        raise TimerError(
            "timer_schedule_invalid",
            f"A {action_kind} timer may repeat at most every {minimum:g} seconds.",
            reason="interval_below_minimum",
            minimum_seconds=minimum,
        )


def check_active(connection: Any, settings: Any, agent: str | None = None) -> None:
    """Refuse a new timer when ``agent`` already holds its share of active ones (so one agent cannot use up
    every other agent's), or when the store holds the global ceiling."""
    base = select(func.count()).select_from(timers)
    base = base.where(timers.c.status == "active", timers.c.request_id.is_(None))  # steps: docs/hitl.md
    mine = base.where(timers.c.agent.is_(None) if agent is None else timers.c.agent == agent)
    limit = int(settings.baton_timer_max_active)
    active = connection.execute(mine).scalar_one()
    if active >= limit:
        raise TimerError(
            "timer_limit_reached",
            f"This agent already has {active} active timers (at most {limit}); cancel one first.",
            reason="active_timers",
            limit=limit,
        )
    ceiling = int(settings.baton_timer_max_active_total)
    if connection.execute(base).scalar_one() >= ceiling:
        raise TimerError(
            "timer_limit_reached",
            f"The server already holds {ceiling} active timers, its ceiling; cancel one first.",
            reason="active_timers_total",
            limit=ceiling,
        )


class SpawnRate:
    """A sliding-hour window of timer-started subagents in this process."""

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._stamps: deque[float] = deque()
        self._lock = threading.Lock()

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> SpawnRate:
        """The runtime's window (one per server process)."""
        rate = runtime.services.get("timer_spawn_rate")
        if not isinstance(rate, SpawnRate):
            rate = runtime.services["timer_spawn_rate"] = cls(runtime.settings.baton_timer_spawns_per_hour)
        return rate

    def take(self, now: float | None = None) -> None:
        """Count one spawn, or raise ``timer_limit_reached`` when the hour's budget is spent."""
        now = clock.monotonic() if now is None else now
        with self._lock:
            while self._stamps and self._stamps[0] <= now - SPAWN_WINDOW_SECONDS:
                self._stamps.popleft()
            if len(self._stamps) >= self.per_hour:
                raise TimerError(
                    "timer_limit_reached",
                    f"Timers may start at most {self.per_hour} subagents an hour; this firing spawned none.",
                    reason="spawn_rate",
                    limit=self.per_hour,
                )
            self._stamps.append(now)
