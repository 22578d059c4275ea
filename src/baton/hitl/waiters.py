"""Wakeups for waiting tool calls: an event per request id, plus a short store poll for other processes.

A decision made in this process (an MCP call, the web inbox) sets the request's event directly. A
decision made by another process sharing the store (``baton hitl approve``, another replica) is seen by
one poller task per process that, while anything waits, checks every ``poll_seconds`` which of the
awaited requests left ``pending``; on PostgreSQL a NOTIFY from the deciding replica wakes it at once. The same poller refreshes the waiters' heartbeat in the store, so a
decider in any process can tell whether somebody is still waiting.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import anyio
from sqlalchemy import and_, select, update

from baton import clock
from baton.runtime import Runtime
from baton.store.leases import process_alive
from baton.store.schema import hitl_requests
from baton.store.signals import signals_for

log = logging.getLogger("baton.hitl")

POLL_SECONDS = 0.2
#: Decisions are published as ``hitl:<request_id>`` (PostgreSQL NOTIFY reaches every replica at once).
SIGNAL_PREFIX = "hitl:"
HEARTBEAT_SECONDS = 5.0
#: A waiter whose heartbeat is older than this is presumed dead (its process was killed).
STALE_WAITER_SECONDS = 3 * HEARTBEAT_SECONDS
_CHUNK = 500
#: ``waiter_instance`` of a request between the legs of a multi-round-trip call (``waiter_seen_epoch`` is
#: then the round's deadline, not a heartbeat).
ROUND_WAITER = "mrtr:"


@dataclass
class Slot:
    """The waiters of one request in this process."""

    event: anyio.Event = field(default_factory=anyio.Event)
    count: int = 0


class Waiters:
    """Every request this process waits on, and the poller that notices decisions made elsewhere."""

    def __init__(self, runtime: Runtime, poll_seconds: float = POLL_SECONDS) -> None:
        self.runtime = runtime
        self.poll_seconds = poll_seconds
        self.slots: dict[str, Slot] = {}
        self._poller: asyncio.Task[None] | None = None
        self.signals = signals_for(runtime)
        self._subscribed = False

    def enter(self, request_id: str) -> Slot:
        """Register one waiter on ``request_id`` and make sure the poller runs."""
        slot = self.slots.get(request_id)
        if slot is None:
            slot = self.slots[request_id] = Slot()
            self._mark(request_id, self.runtime.instance_id)
        slot.count += 1
        self._ensure_poller()
        return slot

    def leave(self, request_id: str, slot: Slot) -> None:
        """Unregister one waiter; the last one clears the request's waiter mark in the store."""
        slot.count -= 1
        if slot.count > 0 or self.slots.get(request_id) is not slot:
            return
        del self.slots[request_id]
        try:
            with self.runtime.store.write() as connection:
                connection.execute(
                    update(hitl_requests)
                    .where(
                        hitl_requests.c.id == request_id,
                        hitl_requests.c.waiter_instance == self.runtime.instance_id,
                    )
                    .values(waiter_instance=None)
                )
        except Exception:  # the mark only informs "waiter gone"; never fail a waiter's exit
            log.warning("could not clear the waiter mark of %s", request_id, exc_info=True)

    def wake(self, request_id: str) -> None:
        """Wake every local waiter of ``request_id`` (after its decision committed)."""
        slot = self.slots.get(request_id)
        if slot is not None:
            slot.event.set()

    def is_waiting(self, request_id: str) -> bool:
        """Whether this process has a live waiter on ``request_id``."""
        return request_id in self.slots

    def waiter_alive(self, request_id: str, instance: str | None, seen_epoch: float | None) -> bool:
        """Whether the waiter recorded for a request still runs (judged from any process)."""
        if self.is_waiting(request_id):
            return True
        if instance is None or instance == self.runtime.instance_id:
            return False
        if instance.startswith(ROUND_WAITER):  # an open MRTR round: the client's retry is the waiter
            return seen_epoch is not None and clock.time() < seen_epoch
        if seen_epoch is None or clock.time() - seen_epoch > STALE_WAITER_SECONDS:
            return False
        return process_alive(instance)

    def open_round(self, request_id: str, nonce: str, until_epoch: float) -> None:
        """Count the client of an open MRTR round as waiting until its state expires (or it retries)."""
        with self.runtime.store.write() as connection:
            connection.execute(
                update(hitl_requests)
                .where(hitl_requests.c.id == request_id)
                .values(waiter_instance=ROUND_WAITER + nonce[:16], waiter_seen_epoch=until_epoch)
            )

    def _mark(self, request_id: str, instance: str) -> None:
        with self.runtime.store.write() as connection:
            connection.execute(
                update(hitl_requests)
                .where(hitl_requests.c.id == request_id)
                .values(waiter_instance=instance, waiter_seen_epoch=clock.time())
            )

    def _ensure_poller(self) -> None:
        if self.signals.cross_process and not self._subscribed:
            self.signals.subscribe(SIGNAL_PREFIX, lambda topic: self.wake(topic.removeprefix(SIGNAL_PREFIX)))
            self._subscribed = True
        loop = asyncio.get_running_loop()
        if self._poller is None or self._poller.done() or self._poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll_loop(), name="hitl-poller")

    async def _poll_loop(self) -> None:
        await self.signals.ensure_listening()
        last_beat = clock.time()
        while self.slots:
            await asyncio.sleep(self.poll_seconds)
            ids = [rid for rid, slot in self.slots.items() if not slot.event.is_set()]
            if not ids:
                continue
            try:
                for rid in self._decided(ids):
                    self.wake(rid)
                if clock.time() - last_beat >= HEARTBEAT_SECONDS:
                    self._heartbeat(ids)
                    last_beat = clock.time()
            except Exception:  # a locked or briefly unavailable store: try again next round
                log.warning("hitl poll failed", exc_info=True)

    def _decided(self, ids: list[str]) -> list[str]:
        found: list[str] = []
        with self.runtime.store.read() as connection:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                found.extend(
                    connection.execute(
                        select(hitl_requests.c.id).where(
                            and_(hitl_requests.c.id.in_(chunk), hitl_requests.c.status != "pending")
                        )
                    ).scalars()
                )
        return found

    def _heartbeat(self, ids: list[str]) -> None:
        with self.runtime.store.write() as connection:
            for start in range(0, len(ids), _CHUNK):
                connection.execute(
                    update(hitl_requests)
                    .where(
                        hitl_requests.c.id.in_(ids[start : start + _CHUNK]),
                        hitl_requests.c.status == "pending",
                    )
                    .values(waiter_instance=self.runtime.instance_id, waiter_seen_epoch=clock.time())
                )
