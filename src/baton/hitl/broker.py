"""The human-in-the-loop broker: requests persisted in the store, first-decision-wins, conservative expiry.

Nothing but an explicit approval recorded by :meth:`HitlBroker.respond` ever sets ``approved``: a
timeout, a cancelled or crashed waiter, a malformed decision or any error leaves the request pending
or expired, and an expired request reads as not approved.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from baton.canonical import iso
from baton.errors import ArgumentError, HitlError
from baton.hitl.announce import ANNOUNCER_SERVICE, announce_safely
from baton.hitl.escalation import Escalation, close_in, schedule_in
from baton.hitl.pending_page import DUE, PENDING, PageQuery, PendingPage, pending_query
from baton.hitl.quorum import count_approval, with_approvals
from baton.hitl.records import (
    MAX_TIMEOUT_SECONDS,
    Decision,
    NewRequest,
    already_decided,
    check_approver,
    decider_name,
    decision_values,
    link_used,
    not_found,
    public_view,
    refusal,
    row_view,
    screen_requests,
)
from baton.hitl.steps import PlannedStep, StepSyntaxError, parse_steps, plan
from baton.hitl.terminal_line import SERVICE as TERMINAL_SERVICE
from baton.hitl.waiters import SIGNAL_PREFIX, Waiters
from baton.receipts import canonical_json, sha256_hex
from baton.rows import Screened
from baton.runtime import Runtime
from baton.schema import hitl_link_uses, hitl_requests
from baton.timers.actions import HITL_STEPS_SERVICE

log = logging.getLogger("baton.hitl")

#: Awaited every few seconds while a call waits: ``tick(waited_seconds, total_seconds)``.
Tick = Callable[[float, float], Awaitable[None]]
MIN_TICK_SECONDS = 0.1

__all__ = ["Decision", "HitlBroker", "NewRequest", "Tick", "get_broker", "public_view"]

_ANY_DUE = select(hitl_requests.c.id).where(DUE).limit(1)
_ALL_DUE = select(hitl_requests.c.id).where(DUE)
_OPEN_OF_AGENT = select(func.count()).where(
    PENDING, hitl_requests.c.agent == bindparam("agent"), hitl_requests.c.expires_epoch > bindparam("now")
)


class HitlBroker:
    """Owns every request in the store and wakes the tool calls waiting on them."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.waiters = Waiters(runtime)
        self._background: set[asyncio.Task[Any]] = set()

    # requests -------------------------------------------------------------------------------------

    async def create(self, new: NewRequest) -> dict[str, Any]:
        """Persist a request (and its receipt), announce it in the background and return its view."""
        timeout = new.timeout_seconds or self.runtime.settings.hitl_timeout_seconds
        if not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
            raise ArgumentError(
                "invalid_arguments",
                f"The timeout (timeout_seconds, or HITL_TIMEOUT_SECONDS when none is given) must be "
                f"between 1 and {MAX_TIMEOUT_SECONDS} seconds.",
            )
        required, step_up = self._quorum_and_step_up(new)
        planned = self._plan_steps(new, timeout)
        redact = self.runtime.redactor
        request_id = f"hr_{uuid.uuid4().hex[:20]}"
        now = time.time()
        context = redact.value(new.context) if new.context is not None else None
        digest = new.arguments_sha256 or sha256_hex(canonical_json(context))
        row = {
            "id": request_id,
            "kind": new.kind,
            "message": redact.text(new.message),
            "context": context,
            "options": redact.value(new.options) if new.options is not None else None,
            "urgent": new.urgent,
            "status": "pending",
            "created_at": iso(now),
            "expires_at": iso(now + timeout),
            "expires_epoch": now + timeout,
            "owner": self.runtime.instance_id,
            "agent": new.agent,
            "required_approvals": required,
            "step_up": step_up,
            "arguments_sha256": digest,
            "provenance": redact.value(new.provenance) if new.provenance else None,
        }
        with self.runtime.store.write() as connection:
            if new.agent is not None:
                self._check_cap(connection, new.agent, now)
            connection.execute(insert(hitl_requests).values(**row))
            steps = schedule_in(connection, self.runtime, request_id, planned, now)
            self.runtime.receipts.append_in(
                connection,
                "hitl_requested",
                {
                    "request_id": request_id,
                    "kind": new.kind,
                    "message": row["message"],
                    "context_sha256": sha256_hex(canonical_json(row["context"])),
                    "options": row["options"],
                    "urgent": new.urgent,
                    "timeout_seconds": timeout,
                    "required_approvals": required,
                    "step_up": step_up,
                    "arguments_sha256": digest,
                    "created_at": row["created_at"],
                    "expires_at": row["expires_at"],
                    "agent": new.agent,
                    "provenance": row["provenance"],
                    "escalation": steps,
                },
            )
        if steps and (timers := self.runtime.services.get("timers")) is not None:
            timers.wake()  # the scheduler plans for the first step now, not at its next rescan
        view = self.get(request_id)
        self._spawn(self._announce(view))
        return view

    def _plan_steps(self, new: NewRequest, timeout: int) -> list[PlannedStep]:
        """The request's escalation steps (BATON_HITL_ESCALATION's, then its own) on its clock; a malformed
        or impossible step of its own is ``invalid_arguments``, an unknown person ``person_not_found``."""
        try:
            requested = parse_steps(new.escalation)
            planned = plan(self.runtime.settings.escalation_steps, requested, timeout)
        except StepSyntaxError as exc:
            raise ArgumentError("invalid_arguments", f"escalation: {exc}") from None
        named = {step.person for step in requested if step.person is not None}
        if named:
            from baton.hitl.people import People

            people = People(self.runtime)
            for name in sorted(named):
                people.get(name)
        return planned

    def _check_cap(self, connection: Connection, agent: str, now: float) -> None:
        """Refuse a request past the agent's cap of open requests (``hitl_too_many_pending``)."""
        cap = self.runtime.settings.baton_hitl_max_pending_per_agent
        open_count = int(connection.execute(_OPEN_OF_AGENT, {"agent": agent, "now": now}).scalar_one())
        if open_count >= cap:
            raise HitlError(
                "hitl_too_many_pending",
                f"You already have {open_count} open requests (at most {cap}); wait for a person to "
                "decide some, or for them to expire, before asking again.",
                pending=open_count,
                limit=cap,
            )

    def _quorum_and_step_up(self, new: NewRequest) -> tuple[int, bool]:
        """The request's quorum (within BATON_HITL_MAX_REQUIRED_APPROVALS) and whether it needs step-up."""
        if new.kind != "approval":
            return 1, False
        cap = self.runtime.settings.baton_hitl_max_required_approvals
        required = new.required_approvals or 1
        if not 1 <= required <= cap:
            raise ArgumentError(
                "invalid_arguments",
                f"required_approvals must be between 1 and {cap} (BATON_HITL_MAX_REQUIRED_APPROVALS).",
            )
        return required, bool(new.step_up or self.runtime.settings.baton_hitl_step_up)

    def get(self, request_id: str, agent: str | None = None) -> dict[str, Any]:
        """One request's full state (a pending request past its expiry is marked expired first).

        With ``agent``, another agent's request reads exactly as an unknown id (``hitl_request_not_found``).
        """
        view = self._read(request_id, agent)
        if view["status"] == "pending" and view["expires_epoch"] <= time.time():
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
        now = time.time()
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
        query = PageQuery(limit, cursor, agent, time.time())
        read = query.read(self.runtime.store, sweep_first=True)
        if read is None:  # a request is due: sweep the expired ones, then read the page again
            self.expire_due()
            read = query.read(self.runtime.store, sweep_first=False)
            assert read is not None
        return query.page(read, self.with_approvals)

    def expire_due(self) -> int:
        """Mark every pending request past its expiry as expired (one receipt each); returns how many."""
        now = time.time()
        with self.runtime.store.read() as connection:
            if connection.execute(_ANY_DUE, {"now": now}).first() is None:
                return 0
        expired = 0
        with self.runtime.store.write() as connection:
            for request_id in connection.execute(_ALL_DUE, {"now": now}).scalars().all():
                expired += self._expire_in(connection, request_id, now)
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
                expired, final = self._decide_in(connection, request_id, decision, spend_link)
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

    def _decide_in(
        self, connection: Connection, request_id: str, decision: Decision, spend_link: str | None
    ) -> tuple[HitlError | None, bool]:
        """Decide inside one transaction; raising rolls everything back, an expiry is returned to commit.

        Returns ``(expiry, final)``: ``final`` is false for a partial approval of a quorum."""
        now = time.time()
        query = select(hitl_requests).where(hitl_requests.c.id == request_id).with_for_update()
        row = connection.execute(query).first()
        refused = refusal(row, now, request_id)
        if refused is not None:
            if refused.error_class == "hitl_request_expired" and row is not None and row.status == "pending":
                self._expire_in(connection, request_id, now)
                return refused, False
            raise refused
        assert row is not None
        values = decision_values(row, decision, self.runtime.redactor.text)
        by = decider_name(decision)
        approvers = [by]
        if values["status"] == "approved":
            check_approver(self.runtime, row, decision, by)
        if spend_link is not None:
            used = select(hitl_link_uses.c.nonce).where(hitl_link_uses.c.nonce == spend_link)
            if connection.execute(used).first() is not None:
                raise link_used(request_id)
            connection.execute(
                insert(hitl_link_uses).values(nonce=spend_link, request_id=request_id, used_at=iso(now))
            )
        if values["status"] == "approved" and (row.required_approvals or 1) > 1:
            approvers = count_approval(self.runtime, connection, row, decision, by, now)
            if len(approvers) < row.required_approvals:
                return None, False
        gone = not self.waiters.waiter_alive(request_id, row.waiter_instance, row.waiter_seen_epoch)
        result = connection.execute(
            update(hitl_requests)
            .where(
                hitl_requests.c.id == request_id,
                hitl_requests.c.status == "pending",
                hitl_requests.c.expires_epoch > now,
            )
            .values(
                **values,
                responded_at=iso(now),
                decided_via=decision.via,
                decided_by=", ".join(approvers),
                waiter_gone=gone,
            )
        )
        if result.rowcount != 1:  # another decider committed first (PostgreSQL re-checks the WHERE)
            raise already_decided(request_id)
        close_in(connection, request_id, now)
        self.runtime.receipts.append_in(
            connection,
            "hitl_decided",
            {
                "request_id": request_id,
                "kind": row.kind,
                "decision": values["status"],
                "approved": values["approved"],
                "response": values["response"],
                "admin_notes": values["admin_notes"],
                "via": decision.via,
                "agent": row.agent,
                "decided_by": ", ".join(approvers),
                "approvers": approvers,
                "required_approvals": row.required_approvals or 1,
                "step_up": bool(decision.step_up) if row.step_up else False,
                "waiter_gone": gone,
                "responded_at": iso(now),
            },
        )
        return None, True

    def _expire_in(self, connection: Connection, request_id: str, now: float) -> int:
        result = connection.execute(
            update(hitl_requests)
            .where(
                hitl_requests.c.id == request_id,
                hitl_requests.c.status == "pending",
                hitl_requests.c.expires_epoch <= now,
            )
            .values(status="expired", approved=False)
        )
        if result.rowcount != 1:
            return 0
        close_in(connection, request_id, now)
        self.runtime.receipts.append_in(
            connection, "hitl_expired", {"request_id": request_id, "expired_at": iso(now)}
        )
        return 1

    def withdraw(self, request_id: str, reason: str) -> bool:
        """Close a pending request nobody waits for any more (its asker was cancelled) as expired, with a
        ``hitl_withdrawn`` receipt; a later decision is refused with ``hitl_request_expired``."""
        now = time.time()
        with self.runtime.store.write() as connection:
            changed = connection.execute(
                update(hitl_requests)
                .where(hitl_requests.c.id == request_id, hitl_requests.c.status == "pending")
                .values(status="expired", approved=False)
            ).rowcount
            if changed:
                close_in(connection, request_id, now)
                self.runtime.receipts.append_in(
                    connection,
                    "hitl_withdrawn",
                    {"request_id": request_id, "reason": reason, "withdrawn_at": iso(now)},
                )
        if changed:
            self.waiters.wake(request_id)
        return bool(changed)

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
        started = time.time()
        tick_seconds = max(MIN_TICK_SECONDS, tick_seconds)
        until = view["expires_epoch"]
        if window_seconds is not None:
            until = min(until, started + window_seconds)
        slot = self.waiters.enter(request_id)
        try:
            next_tick = started + tick_seconds
            while not slot.event.is_set() and time.time() < until:
                with anyio.move_on_after(max(0.0, min(until, next_tick) - time.time())):
                    await slot.event.wait()
                if tick is not None and not slot.event.is_set() and time.time() >= next_tick:
                    await tick(time.time() - started, until - started)
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
        await announce_safely(self.runtime, {**public_view(view), **rules}, link)

    def signed_link(self, request_id: str, expires_epoch: float) -> str | None:
        """A signed single-use inbox link, when the HTTP server's base URL is known."""
        base_url = self.runtime.settings.baton_public_url or self.runtime.services.get("http_base_url")
        if not base_url:
            return None
        from baton.hitl.links import LinkSigner

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
