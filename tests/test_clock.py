"""baton.clock: the one time source every limit reads, and the manual clock a test drives."""

from __future__ import annotations

from datetime import UTC

import pytest

from baton import clock
from baton.testing import ManualClock


def test_a_manual_clock_stands_still_until_advanced_and_then_moves_every_reading() -> None:
    manual = ManualClock(start=1_700_000_000.0)
    with clock.use(manual):
        wall, tick = clock.time(), clock.monotonic()
        assert (clock.time(), clock.monotonic()) == (wall, tick)
        manual.advance(2.5)
        assert (clock.time(), clock.monotonic()) == (wall + 2.5, tick + 2.5)
        assert clock.now() == manual.now() and clock.now().tzinfo is UTC
        assert clock.now().timestamp() == wall + 2.5


def test_use_restores_the_previous_clock_even_when_the_block_fails() -> None:
    outer, inner = ManualClock(start=100.0), ManualClock(start=200.0)
    seen: list[float] = []

    def failing_block() -> None:
        with clock.use(inner):
            seen.append(clock.time())
            raise RuntimeError("the block fails")

    with clock.use(outer):
        with pytest.raises(RuntimeError, match="the block fails"):
            failing_block()
        assert seen == [200.0]
        assert clock.current() is outer and clock.time() == 100.0
    assert clock.current() is clock.SYSTEM


def test_a_manual_clock_never_goes_back_but_its_wall_reading_can_be_set() -> None:
    manual = ManualClock(start=1_000.0)
    tick = manual.monotonic()
    with pytest.raises(ValueError, match="only moves forward"):
        manual.advance(-1)
    manual.set(500.0)
    assert (manual.time(), manual.monotonic()) == (500.0, tick)
