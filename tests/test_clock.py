"""baton.clock: the one time source every limit reads, and the manual clock a test drives."""

from __future__ import annotations

import re
from datetime import UTC

import pytest

from baton import clock
from baton.testing import ManualClock
from tests.conftest import SRC


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


#: Modules that still read the system clock directly, and why: none of them limits or expires anything.
SYSTEM_CLOCK_READERS = {
    "identity/agents.py": "created_at and revoked_at of a token row",
    "identity/os_accounts.py": "when an OS account was linked to a person or unlinked",
    "identity/passkey_admin.py": "when one passkey was revoked",
    "evidence/canonical.py": "utc_now(): the timestamps of receipts and rows",
    "identity/chat_identities.py": "when an identity was linked or unlinked",
    "clock.py": "the system clock itself",
    "gateway/lock/bundle_writer.py": "the SBOM's creation time",
    "gateway/sandbox/cgroups.py": "a deadline for the kernel to remove a cgroup (I/O)",
    "gateway/replay/protocol.py": "the read deadline on an upstream's pipe (I/O)",
    "gateway/lock/verifier.py": "observed_at of a verification (the verifier imports nothing of baton)",
    "hitl/cli.py": "the CLI's own polling deadline",
    "hitl/mrtr.py": "when a nonce was spent",
    "ops/install.py": "the name of a backup file",
    "notify/delivery.py": "a delivery's duration, for its receipt",
    "notify/interactive.py": "a delivery's duration, for its receipt",
    "notify/webhook.py": "the webhook-timestamp a receiver checks (its limit, not baton's)",
    "store/engine.py": "the wait for a locked SQLite database at open (I/O)",
}
#: Whole packages left on the system clock: the campaign's harness deadlines, the test peers' protocols.
SYSTEM_CLOCK_PACKAGES = ("campaign/", "testing/")


def test_no_limit_or_expiry_reads_the_system_clock_directly() -> None:
    direct = re.compile(r"\btime\.(time|monotonic)\(|\bdatetime\.now\(")
    readers = {
        path.relative_to(SRC / "baton").as_posix()
        for path in (SRC / "baton").rglob("*.py")
        if direct.search(path.read_text(encoding="utf-8"))
    }
    unexplained = {
        p for p in readers - SYSTEM_CLOCK_READERS.keys() if not p.startswith(SYSTEM_CLOCK_PACKAGES)
    }
    assert unexplained == set(), "read baton.clock instead (or say here why it is no limit)"
