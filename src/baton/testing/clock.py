"""A clock a test drives: time stands still until the test moves it (``baton.clock.use(ManualClock())``)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

#: Where a ManualClock's monotonic reading starts: far from zero, as a real one is.
MONOTONIC_START = 1_000_000.0


class ManualClock:
    """Wall, monotonic and datetime readings that move only by ``advance`` (and the wall one by ``set``)."""

    def __init__(self, start: float | None = None) -> None:
        self._wall = time.time() if start is None else float(start)
        self._monotonic = MONOTONIC_START
        self._lock = threading.Lock()

    def time(self) -> float:
        """Seconds since the epoch, as last set or advanced."""
        return self._wall

    def monotonic(self) -> float:
        """The monotonic reading, moved only by ``advance``."""
        return self._monotonic

    def now(self) -> datetime:
        """The wall reading as an aware UTC datetime."""
        return datetime.fromtimestamp(self._wall, UTC)

    def advance(self, seconds: float) -> None:
        """Move both readings forward by ``seconds`` (never back: a monotonic clock does not)."""
        if seconds < 0:
            raise ValueError("a clock only moves forward; use set() to move the wall reading back")
        with self._lock:
            self._wall += seconds
            self._monotonic += seconds

    def set(self, epoch: float) -> None:
        """Put the wall reading at ``epoch`` (as a system clock can be set); the monotonic one stays."""
        with self._lock:
            self._wall = float(epoch)
