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
from baton.timers import mirror
from baton.timers.actions import Outcome, run_action
from baton.timers.schedule import now_utc
from baton.timers.service import Claim, TimerService

log = logging.getLogger("baton.timers")

#: How often the store is re-read for timers set, changed or cancelled by other processes.
RESCAN_SECONDS = 1.0
#: Firings claimed in one transaction (each still a conditional UPDATE of its own).
CLAIM_BATCH = 500


class Scheduler:
    """Fires due timers for one server process."""

    def __init__(self, runtime: Runtime, service: TimerService | None = None) -> None:
        self.runtime = runtime
        self.service = service or TimerService(runtime)
        #: Firings due before this moment fell due while this process was not running: ``missed``.
        self.started_at = now_utc()
        self._wake = asyncio.Event()
        self._firings: set[asyncio.Task[None]] = set()
        #: Finished firings waiting to be recorded; written together, one transaction per loop turn.
        self._finished: list[tuple[Claim, Outcome]] = []
        self._flush_scheduled = False
        self.service.listeners.append(self.wake)

    def wake(self) -> None:
        """Re-plan now (a timer was set or cancelled)."""
        self._wake.set()

    async def run(self) -> None:
        """Adopt and mirror, then fire due timers until cancelled (missed ones first, at start)."""
        mirror.adopt(self.runtime)
        mirror.sync(self.runtime)
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
        claims = self.service.claim_due(now, limit=CLAIM_BATCH, missed_before=self.started_at)
        loop = asyncio.get_running_loop()
        for claim in claims:
            task = loop.create_task(self._fire(claim), name=f"timer-{claim.timer_id}")
            self._firings.add(task)
            task.add_done_callback(self._firings.discard)
        return len(claims)

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
            firing = {
                "timer_id": claim.timer_id,
                "due_at": claim.due_at,
                "fired_at": claim.fired_at,
                "missed": claim.missed,
            }
            outcome = await run_action(self.runtime, claim.action, claim.agent, firing)
        except asyncio.CancelledError:
            self._record(
                claim, Outcome.failed("interrupted_by_restart", "The server stopped during the firing.")
            )
            raise
        self._record(claim, outcome)

    def _record(self, claim: Claim, outcome: Outcome) -> None:
        """Queue the firing's outcome; the queue is written once this loop turn's firings are done."""
        self._finished.append((claim, outcome))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        finished, self._finished = self._finished, []
        try:
            self.service.record_many(finished)
        except Exception:
            log.exception("could not record %d timer firings", len(finished))

    async def aclose(self) -> None:
        """Cancel in-flight firings (each still writes its receipt)."""
        tasks = list(self._firings)
        for task in tasks:
            task.cancel()
        with anyio.CancelScope(shield=True):  # the server is shutting down: let each receipt be written
            await asyncio.gather(*tasks, return_exceptions=True)
        self._flush()
