"""The one source of time for every rate limit, bucket, TTL, lease, expiry and staleness window.

Code that limits or expires something reads ``clock.time()`` (seconds since the epoch),
``clock.monotonic()`` (for intervals) or ``clock.now()`` (an aware UTC datetime) instead of ``time`` or
``datetime`` directly, so that a test can install a clock it drives (``baton.testing.clock.ManualClock``)
with ``with clock.use(manual): ...`` and a slow machine can never refill a bucket or expire a link early.
The calls stay cheap on the hot path: one module global and one attribute lookup.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Protocol, TypeVar


class Clock(Protocol):
    """What a time source answers: wall seconds, a monotonic reading, and the UTC datetime now."""

    def time(self) -> float:
        """Seconds since the epoch, like ``time.time()``."""
        ...

    def monotonic(self) -> float:
        """A reading that never goes back, like ``time.monotonic()``."""
        ...

    def now(self) -> datetime:
        """The current time, timezone-aware in UTC."""
        ...


class SystemClock:
    """The machine's clocks: the default outside tests."""

    time = staticmethod(_time.time)
    monotonic = staticmethod(_time.monotonic)

    def now(self) -> datetime:
        """``datetime.now(UTC)``."""
        return datetime.now(UTC)


C = TypeVar("C", bound=Clock)

SYSTEM = SystemClock()
_current: Clock = SYSTEM


def time() -> float:
    """Seconds since the epoch from the installed clock."""
    return _current.time()


def monotonic() -> float:
    """A monotonic reading from the installed clock (for intervals, buckets and throttles)."""
    return _current.monotonic()


def now() -> datetime:
    """The current UTC datetime from the installed clock."""
    return _current.now()


def current() -> Clock:
    """The installed clock (the system's unless a test installed its own)."""
    return _current


@contextmanager
def use(clock: C) -> Iterator[C]:
    """Install ``clock`` for the block, so that every limit and expiry in this process reads it."""
    global _current
    previous, _current = _current, clock
    try:
        yield clock
    finally:
        _current = previous
