"""The human-in-the-loop broker: requests persisted in the store, first-decision-wins, conservative expiry.

Nothing but an explicit approval recorded by :meth:`HitlBroker.respond` ever sets ``approved``: a
timeout, a cancelled or crashed waiter, a malformed decision or any error leaves the request pending
or expired, and an expired request reads as not approved.

The broker opens the transactions, sweeps expired requests and wakes the waiting calls; what creating a
request checks and stores is :mod:`baton.hitl.creating`'s, what a decision, an expiry or a withdrawal
writes is :mod:`baton.hitl.deciding`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from baton import clock
from baton.hitl.announce import ANNOUNCER_SERVICE, announce_safely
from baton.hitl.creating import store_request
from baton.hitl.deciding import decide_in, expire_in, withdraw_in
from baton.hitl.escalation import Escalation
from baton.hitl.pending_page import DUE, PageQuery, PendingPage, pending_query
from baton.hitl.quorum import with_approvals
from baton.hitl.records import (
    Decision,
    NewRequest,
    link_used,
    not_found,
    public_view,
    row_view,
    screen_requests,
)
from baton.hitl.terminal_line import SERVICE as TERMINAL_SERVICE
from baton.hitl.waiters import SIGNAL_PREFIX, Waiters
from baton.runtime import Runtime
from baton.store.rows import Screened
from baton.store.schema import hitl_link_uses, hitl_requests
from baton.timers.actions import HITL_STEPS_SERVICE

#: Awaited every few seconds while a call waits: ``tick(waited_seconds, total_seconds)``.
Tick = Callable[[float, float], Awaitable[None]]
MIN_TICK_SECONDS = 0.1

__all__ = ["Decision", "HitlBroker", "NewRequest", "Tick", "get_broker", "public_view"]

_ANY_DUE = select(hitl_requests.c.id).where(DUE).limit(1)
_ALL_DUE = select(hitl_requests.c.id).where(DUE)


class HitlBroker:
    """Owns every request in the store and wakes the tool calls waiting on them."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.waiters = Waiters(runtime)
        self._background: set[asyncio.Task[Any]] = set()

    # requests -------------------------------------------------------------------------------------

    async def create(self, new: NewRequest) -> dict[str, Any]:
        """Persist a request (and its receipt), announce it in the background and return its view.

        What is checked and stored, in one transaction, is :func:`baton.hitl.creating.store_request`'s."""
        stored = store_request(self.runtime, new)
        if stored.steps and (timers := self.runtime.services.get("timers")) is not None:
            timers.wake()  # the scheduler plans for the first step now, not at its next rescan
        view = self.get(stored.request_id)
        self._spawn(self._announce(view))
        return view

    def get(self, request_id: str, agent: str | None = None) -> dict[str, Any]:
        """One request's full state (a pending request past its expiry is marked expired first).

        With ``agent``, another agent's request reads exactly as an unknown id (``hitl_request_not_found``).
        """
        view = self._read(request_id, agent)
        if view["status"] == "pending" and view["expires_epoch"] <= clock.time():
            self.expire_due()
            view = self._read(request_id, agent)
        return view

    def list_pending(self, agent: str | None = None) -> list[dict[str, Any]]:
        """Every pending request (of ``agent`` alone, when given), urgent first, then the soonest to expire."""
        return self.with_approvals(self.screen_pending(agent).rows)

    def with_approvals(self, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Fill ``approvals`` (who approved so far) of the views that need a quorum."""
        return with_approvals(self.runtime, views)

    def screen_pending(self, agent: str | None = None) -> Screened:
        """Every pending request (of ``agent`` alone, when given), and the stored rows that could not be
        listed (skipped, with why)."""
        self.expire_due()
        now = clock.time()
        query = pending_query()
        if agent is not None:
            query = query.where(hitl_requests.c.agent == agent)
        with self.runtime.store.read() as connection:
            rows = connection.execute(query).all()
        screened = screen_requests(rows)
        screened.rows = [view for view in screened.rows if view["expires_epoch"] > now]
        return screened

    def page_pending(self, limit: int, cursor: str | None = None, agent: str | None = None) -> PendingPage:
        """One page of pending requests in the same order, after ``cursor``; keyset-paginated on the
        ``ix_hitl_requests_pending_order`` index, so a page costs the same with 100 or 100,000 pending.

        Expired requests are swept first, so the page reads ``status='pending'`` alone (an expiry
        condition would steer the planner off the ordering index); one that expired since is dropped.
        What a page reads and how its rows become one is :mod:`baton.hitl.pending_page`'s.
        """
        query = PageQuery(limit, cursor, agent, clock.time())
        read = query.read(self.runtime.store, sweep_first=True)
        if read is None:  # a request is due: sweep the expired ones, then read the page again
            self.expire_due()
            read = query.read(self.runtime.store, sweep_first=False)
            assert read is not None
        return query.page(read, self.with_approvals)

    def expire_due(self) -> int:
        """Mark every pending request past its expiry as expired (one receipt each); returns how many."""
        now = clock.time()
        with self.runtime.store.read() as connection:
            if connection.execute(_ANY_DUE, {"now": now}).first() is None:
                return 0
        expired = 0
        with self.runtime.store.write() as connection:
            for request_id in connection.execute(_ALL_DUE, {"now": now}).scalars().all():
                expired += expire_in(self.runtime, connection, request_id, now)
        return expired

    # decisions ------------------------------------------------------------------------------------

    def respond(
        self, request_id: str, decision: Decision, *, spend_link: str | None = None
    ) -> dict[str, Any]:
        """Record a decision on a pending request (atomically); once final, later ones are refused.

        ``spend_link`` is a signed link's nonce, recorded as used in the same transaction, so a link
        is spent exactly when its decision is recorded (a step-up's nonce is spent the same way).
        An approval of a request that needs N people is recorded as a partial approval until the Nth
        distinct person approves; one rejection rejects.
        """
        if spend_link is None and decision.step_up is not None:
            spend_link = decision.step_up.nonce
        try:
            with self.runtime.store.write() as connection:
                expired, final = decide_in(
                    self.runtime, self.waiters, connection, request_id, decision, spend_link
                )
        except IntegrityError as exc:  # the same link (or step-up) spent, or the same person, concurrently
            raise link_used(request_id) from exc
        if expired is not None:
            raise expired
        if not final:  # a partial approval: the waiting call keeps waiting
            return self.get(request_id)
        self.waiters.wake(request_id)
        if self.waiters.signals.cross_process:
            self.waiters.signals.publish(SIGNAL_PREFIX + request_id)
        return self.get(request_id)

    def withdraw(self, request_id: str, reason: str) -> bool:
        """Close a pending request nobody waits for any more (its asker was cancelled) as expired, with a
        ``hitl_withdrawn`` receipt; a later decision is refused with ``hitl_request_expired``."""
        now = clock.time()
        with self.runtime.store.write() as connection:
            withdrawn = withdraw_in(self.runtime, connection, request_id, reason, now)
        if withdrawn:
            self.waiters.wake(request_id)
        return withdrawn

    def link_spent(self, nonce: str) -> bool:
        """Whether a signed link with this nonce was already used."""
        with self.runtime.store.read() as connection:
            query = select(hitl_link_uses.c.nonce).where(hitl_link_uses.c.nonce == nonce)
            return connection.execute(query).first() is not None

    # waiting --------------------------------------------------------------------------------------

    async def wait(
        self,
        request_id: str,
        *,
        window_seconds: float | None = None,
        tick: Tick | None = None,
        tick_seconds: float = 5.0,
    ) -> dict[str, Any]:
        """Wait until the request is decided or expires, or the window ends; returns its view.

        ``tick(waited_seconds, total_seconds)`` is awaited every ``tick_seconds`` while waiting.
        """
        import anyio

        view = self.get(request_id)
        if view["status"] != "pending":
            return view
        started = clock.time()
        tick_seconds = max(MIN_TICK_SECONDS, tick_seconds)
        until = view["expires_epoch"]
        if window_seconds is not None:
            until = min(until, started + window_seconds)
        slot = self.waiters.enter(request_id)
        try:
            next_tick = started + tick_seconds
            while not slot.event.is_set() and clock.time() < until:
                with anyio.move_on_after(max(0.0, min(until, next_tick) - clock.time())):
                    await slot.event.wait()
                if tick is not None and not slot.event.is_set() and clock.time() >= next_tick:
                    await tick(clock.time() - started, until - started)
                    next_tick += tick_seconds
        finally:
            self.waiters.leave(request_id, slot)
        return self.get(request_id)

    # announcing -----------------------------------------------------------------------------------

    async def _announce(self, view: dict[str, Any]) -> None:
        terminal = self.runtime.services.get(TERMINAL_SERVICE)
        if terminal is not None:
            terminal.announce(view)
        if self.runtime.services.get(ANNOUNCER_SERVICE) is None:
            return  # a channel-less broker: nothing to tell, no link to sign
        link = self.signed_link(view["request_id"], view["expires_epoch"])
        # the channels also learn whether one press may decide it (chat buttons: docs/notifications.md)
        rules = {"required_approvals": view["required_approvals"], "step_up": view["step_up"]}
        deliveries = await announce_safely(self.runtime, {**public_view(view), **rules}, link)
        from baton.hitl.reach import settle

        settle(self.runtime, view["request_id"], deliveries)

    def signed_link(self, request_id: str, expires_epoch: float) -> str | None:
        """A signed single-use inbox link, when the HTTP server's base URL is known."""
        from baton.identity.public_url import link_base

        base_url = link_base(self.runtime)
        if not base_url:
            return None
        from baton.identity.links import LinkSigner

        return LinkSigner.for_runtime(self.runtime).link(str(base_url), request_id, expires_epoch)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work, name="hitl-announce")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # reading --------------------------------------------------------------------------------------

    def _read(self, request_id: str, agent: str | None = None) -> dict[str, Any]:
        with self.runtime.store.read() as connection:
            row = connection.execute(select(hitl_requests).where(hitl_requests.c.id == request_id)).first()
        if row is None or (agent is not None and row.agent != agent):
            raise not_found(request_id)
        return self.with_approvals([row_view(row)])[0]


def get_broker(runtime: Runtime) -> HitlBroker:
    """The runtime's one broker (tools, inbox and CLI share it), created on first use."""
    broker = runtime.services.get("hitl")
    if broker is None:
        broker = runtime.services["hitl"] = HitlBroker(runtime)
        runtime.services.setdefault(HITL_STEPS_SERVICE, Escalation(runtime))  # fired by the timer scheduler
    assert isinstance(broker, HitlBroker)
    return broker
