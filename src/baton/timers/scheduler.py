"""The scheduler: one asyncio loop per server that sleeps until the earliest due time and fires.

It is woken early when this process sets or cancels a timer, and re-reads the store at least every
``RESCAN_SECONDS`` to see timers other processes set or cancelled. Each due time is claimed in the store
(see :meth:`TimerService.claim`) before its action runs, so it fires once however many servers share the
store. Actions run as their own tasks so a slow notification never delays another timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import anyio

from baton.runtime import Runtime
from baton.timers.actions import Outcome, run_action
from baton.timers.schedule import now_utc, parse_time
from baton.timers.service import Claim, TimerService

log = logging.getLogger("baton.timers")

#: How often the store is re-read for timers set, changed or cancelled by other processes.
RESCAN_SECONDS = 1.0


class Scheduler:
    """Fires due timers for one server process."""

    def __init__(self, runtime: Runtime, service: TimerService | None = None) -> None:
        self.runtime = runtime
        self.service = service or TimerService(runtime)
        #: Firings due before this moment fell due while this process was not running: ``missed``.
        self.started_at = now_utc()
        self._wake = asyncio.Event()
        self._firings: set[asyncio.Task[None]] = set()
        self.service.listeners.append(self.wake)

    def wake(self) -> None:
        """Re-plan now (a timer was set or cancelled)."""
        self._wake.set()

    async def run(self) -> None:
        """Adopt and mirror, then fire due timers until cancelled (missed ones first, at start)."""
        self.service.adopt_mirror()
        self.service.sync_mirror()
        try:
            while True:
                self._wake.clear()
                try:
                    self.tick()
                except Exception:  # a locked or unreachable store must not stop the server
                    log.exception("timer scan failed; retrying in %s s", RESCAN_SECONDS)
                    await asyncio.sleep(RESCAN_SECONDS)
                    continue
                await self._sleep()
        finally:
            await self.aclose()

    def tick(self) -> int:
        """Claim every firing due now and start its action; returns how many this process claimed."""
        now = now_utc()
        claimed = 0
        for timer_id, due_at in self.service.due(now):
            missed = parse_time(due_at) < self.started_at
            claim = self.service.claim(timer_id, due_at, now, missed=missed)
            if claim is None:
                continue
            claimed += 1
            task = asyncio.get_running_loop().create_task(self._fire(claim), name=f"timer-{timer_id}")
            self._firings.add(task)
            task.add_done_callback(self._firings.discard)
        return claimed

    async def _sleep(self) -> None:
        try:
            earliest = self.service.earliest()
        except Exception:
            log.exception("timer scan failed; retrying")
            earliest = None
        timeout = RESCAN_SECONDS
        if earliest is not None:
            timeout = min(max((earliest - now_utc()).total_seconds(), 0.0), RESCAN_SECONDS)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _fire(self, claim: Claim) -> None:
        try:
            outcome = await run_action(self.runtime, claim.action)
        except asyncio.CancelledError:
            self._record(
                claim, Outcome.failed("interrupted_by_restart", "The server stopped during the firing.")
            )
            raise
        self._record(claim, outcome)

    def _record(self, claim: Claim, outcome: Outcome) -> None:
        try:
            self.service.record(claim, outcome)
        except Exception:
            log.exception("could not record the firing of timer %s", claim.timer_id)

    async def aclose(self) -> None:
        """Cancel in-flight firings (each still writes its receipt)."""
        tasks = list(self._firings)
        for task in tasks:
            task.cancel()
        with anyio.CancelScope(shield=True):  # the server is shutting down: let each receipt be written
            await asyncio.gather(*tasks, return_exceptions=True)
