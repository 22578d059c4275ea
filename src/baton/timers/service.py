"""Timer state in the store: set, list, cancel, and the atomic claim of one firing (no loop, no MCP).

The store is the source of truth. A firing is claimed by a conditional UPDATE that only matches while
the timer is still active and still due at exactly the time the claimer saw, so across every process
sharing the store each due time is claimed once.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, insert, select, update

from baton.errors import ArgumentError, TimerError
from baton.runtime import Runtime
from baton.store.rows import ListPage, page_of, raw_json
from baton.store.schema import hitl_requests, timers
from baton.timers import mirror
from baton.timers.actions import Outcome
from baton.timers.caps import check_active, check_interval, minimum_interval
from baton.timers.listing import present, screen_timers
from baton.timers.schedule import format_time, next_after, now_utc, parse_action, parse_schedule, parse_time


@dataclass(frozen=True)
class TimerRequest:
    """What ``mcp_set_timer`` asks for."""

    name: str
    action: dict[str, Any]
    fire_at: str | None = None
    delay_seconds: float | None = None
    interval_seconds: float | None = None
    #: The agent that sets it: its firings act as that agent. None for the operator.
    agent: str | None = None


@dataclass(frozen=True)
class Claim:
    """One firing this process won: which timer, for which due time, and what comes next."""

    timer_id: str
    name: str
    action: dict[str, Any]
    due_at: str
    fired_at: str
    missed: bool
    skipped: int
    sequence: int
    next_fire_at: str | None
    agent: str | None = None


class TimerService:
    """Owns the ``timers`` table; every change is a receipt in the same transaction, then rewrites the mirror."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.listeners: list[Callable[[], None]] = []

    # set / list / cancel --------------------------------------------------------------------------

    def set(self, request: TimerRequest) -> dict[str, Any]:
        """Validate and persist a timer; returns its id and first due time."""
        now = now_utc()
        schedule = parse_schedule(request.fire_at, request.delay_seconds, request.interval_seconds, now)
        redactor = self.runtime.redactor  # a credential in a timer never reaches the store or the mirror
        action = redactor.value(parse_action(request.action).model_dump())
        check_interval(self.runtime.settings, action["kind"], schedule.interval_seconds)
        name = redactor.text(request.name.strip())
        if not name:
            raise ArgumentError("invalid_arguments", "The timer needs a non-empty name.")
        timer_id = f"tm_{uuid.uuid4().hex[:20]}"
        first = format_time(schedule.first_fire_at)
        stamp = format_time(now)
        row = {
            "id": timer_id,
            "name": name,
            "schedule": schedule.kind,
            "interval_seconds": schedule.interval_seconds,
            "action": action,
            "status": "active",
            "first_fire_at": first,
            "next_fire_at": first,
            "fire_count": 0,
            "created_at": stamp,
            "updated_at": stamp,
            "created_by": self.runtime.instance_id,
            "agent": request.agent,
        }
        with self.runtime.store.write() as connection:
            check_active(connection, self.runtime.settings, request.agent)
            connection.execute(insert(timers).values(**row))
            self.runtime.receipts.append_in(
                connection,
                "timer_set",
                {
                    "timer_id": timer_id,
                    "name": name,
                    "schedule": schedule.kind,
                    "interval_seconds": schedule.interval_seconds,
                    "next_fire_at": first,
                    "action": action,
                    "agent": request.agent,
                },
            )
        self._changed()
        return {"success": True, **self.get(timer_id)}

    def get(self, timer_id: str, agent: str | None = None) -> dict[str, Any]:
        """One timer as the tools show it (``agent``: only that agent's; another's reads as unknown)."""
        with self.runtime.store.read() as connection:
            row = connection.execute(select(timers).where(timers.c.id == timer_id)).first()
        if row is None or (agent is not None and row.agent != agent):
            raise _not_found(timer_id)
        return present(row._mapping)

    def list(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: tuple[str, str] | None = None,
        agent: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Timers (optionally of one status and one agent) in the order they were set; ``after`` =
        (created_at, id) of the last one seen, ``limit`` rows at most (a stored row that cannot be read is
        left out and logged)."""
        with self.runtime.store.read() as connection:
            rows = connection.execute(self._query(status, limit, after, agent)).all()
        return screen_timers(rows).rows

    def page(
        self, status: str | None, limit: int, after: tuple[str, str] | None = None, agent: str | None = None
    ) -> ListPage:
        """One page of :meth:`list`, with the rows skipped (``{timer_id, reason}``) and the next position."""
        with self.runtime.store.read() as connection:
            rows = connection.execute(self._query(status, limit + 1, after, agent)).all()
        return page_of(rows, limit, screen_timers, lambda r: (r.created_at, r.id))

    @staticmethod
    def _query(
        status: str | None, limit: int | None, after: tuple[str, str] | None, agent: str | None = None
    ) -> Any:
        columns = [raw_json(c) if c.name == "action" else c for c in timers.c]
        query = select(*columns).order_by(timers.c.created_at, timers.c.id)
        if status is not None:
            query = query.where(timers.c.status == status)
        if agent is not None:
            query = query.where(timers.c.agent == agent)
        if after is not None:
            created, last_id = after
            query = query.where(
                (timers.c.created_at > created) | ((timers.c.created_at == created) & (timers.c.id > last_id))
            )
        if limit is not None:
            query = query.limit(limit)
        return query

    def cancel(self, timer_id: str, agent: str | None = None) -> dict[str, Any]:
        """Cancel an active timer for good (``agent``: only that agent's); a firing already claimed still
        completes."""
        stamp = format_time(now_utc())
        with self.runtime.store.write() as connection:
            row = connection.execute(
                select(timers.c.status, timers.c.name, timers.c.agent)
                .where(timers.c.id == timer_id)
                .with_for_update()
            ).first()
            if row is None or (agent is not None and row.agent != agent):
                raise _not_found(timer_id)
            changed = connection.execute(
                update(timers)
                .where(timers.c.id == timer_id, timers.c.status == "active")
                .values(status="cancelled", next_fire_at=None, cancelled_at=stamp, updated_at=stamp)
            ).rowcount
            if not changed:
                _refuse_cancel(timer_id, row.status)
            self.runtime.receipts.append_in(
                connection, "timer_cancelled", {"timer_id": timer_id, "name": row.name, "agent": row.agent}
            )
        self._changed()
        return {"success": True, **self.get(timer_id)}

    # firing ---------------------------------------------------------------------------------------

    def earliest(self) -> datetime | None:
        """The earliest due time of any active timer."""
        query = (
            select(timers.c.next_fire_at).where(timers.c.status == "active").order_by(timers.c.next_fire_at)
        )
        with self.runtime.store.read() as connection:
            value = connection.execute(query.limit(1)).scalar()
        return parse_time(value) if value else None

    def claim(self, timer_id: str, due_at: str, now: datetime, *, missed: bool) -> Claim | None:
        """Atomically take the firing of ``timer_id`` due at ``due_at``; None when another claimer won."""
        with self.runtime.store.write() as connection:
            row = connection.execute(
                select(timers).where(
                    timers.c.id == timer_id, timers.c.status == "active", timers.c.next_fire_at == due_at
                )
            ).first()
            if row is None:
                return None
            return self._claim_row(connection, row, due_at, now, format_time(now), missed)

    def claim_due(
        self, now: datetime, *, limit: int, missed_before: datetime | None = None
    ) -> builtins.list[Claim]:
        """Claim up to ``limit`` firings due at ``now`` in one transaction. On PostgreSQL the due rows
        are locked with SKIP LOCKED, so replicas scanning at once claim disjoint sets instead of
        queueing behind each other's locks; each firing is still its own conditional UPDATE."""
        stamp = format_time(now)
        query = (
            select(timers)
            .where(timers.c.status == "active", timers.c.next_fire_at <= stamp)
            .order_by(timers.c.next_fire_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        claims: builtins.list[Claim] = []
        with self.runtime.store.write() as connection:
            for row in connection.execute(query).all():
                missed = missed_before is not None and parse_time(row.next_fire_at) < missed_before
                claim = self._claim_row(connection, row, row.next_fire_at, now, stamp, missed)
                if claim is not None:
                    claims.append(claim)
        return claims

    def _claim_row(
        self, connection: Any, row: Any, due_at: str, now: datetime, stamp: str, missed: bool
    ) -> Claim | None:
        """The conditional UPDATE that takes one firing: it matches only while the timer is still active
        and still due at exactly ``due_at``."""
        next_fire_at, skipped, status = self._after_firing(row, due_at, now)
        claimable = [timers.c.id == row.id, timers.c.status == "active", timers.c.next_fire_at == due_at]
        request_open = _request_open(now)
        if row.request_id is not None:  # a request's escalation step fires only while the request is open
            claimable.append(request_open)
        won = connection.execute(
            update(timers)
            .where(*claimable)
            .values(
                status=status,
                next_fire_at=next_fire_at,
                fire_count=timers.c.fire_count + 1,
                updated_at=stamp,
                last_due_at=due_at,
                last_fired_at=stamp,
                last_fired_by=self.runtime.instance_id,
                last_missed=missed,
                last_outcome="running",
                last_error_class=None,
            )
        ).rowcount
        if won != 1:
            if row.request_id is not None:  # decided, withdrawn or expired: the step is over, unfired
                connection.execute(
                    update(timers)
                    .where(*claimable[:3], ~request_open)
                    .values(status="cancelled", next_fire_at=None, cancelled_at=stamp, updated_at=stamp)
                )
            return None
        return Claim(
            row.id,
            row.name,
            dict(row.action),
            due_at,
            stamp,
            missed,
            skipped,
            row.fire_count + 1,
            next_fire_at,
            row.agent,
        )

    def _after_firing(self, row: Any, due_at: str, now: datetime) -> tuple[str | None, int, str]:
        """The timer's next due time, the due times skipped to reach it, and its status once this one fires."""
        next_fire_at, skipped, status = None, 0, "completed"
        if row.interval_seconds:
            # timers stored before a cap (or adopted from a mirror) still repeat no faster than it allows
            period = max(
                row.interval_seconds, minimum_interval(self.runtime.settings, str(row.action.get("kind")))
            )
            upcoming, skipped = next_after(parse_time(due_at), period, now)
            next_fire_at, status = format_time(upcoming), "active"
        return next_fire_at, skipped, status

    def record(self, claim: Claim, outcome: Outcome) -> None:
        """Store a firing's outcome on its timer and append its ``timer_fired`` receipt, together."""
        self.record_many([(claim, outcome)])

    def record_many(self, firings: builtins.list[tuple[Claim, Outcome]]) -> None:
        """Store many firings' outcomes and their ``timer_fired`` receipts in one transaction."""
        if not firings:
            return
        with self.runtime.store.write() as connection:
            for claim, outcome in firings:
                connection.execute(
                    update(timers)
                    .where(timers.c.id == claim.timer_id, timers.c.last_due_at == claim.due_at)
                    .values(last_outcome=outcome.outcome, last_error_class=outcome.error_class)
                )
                self.runtime.receipts.append_in(
                    connection, "timer_fired", self._fired_payload(claim, outcome)
                )
        mirror.sync(self.runtime)

    def _fired_payload(self, claim: Claim, outcome: Outcome) -> dict[str, Any]:
        return {
            "timer_id": claim.timer_id,
            "name": claim.name,
            "action_kind": claim.action.get("kind"),
            "due_at": claim.due_at,
            "fired_at": claim.fired_at,
            "missed": claim.missed,
            "skipped": claim.skipped,
            "sequence": claim.sequence,
            "next_fire_at": claim.next_fire_at,
            "fired_by": self.runtime.instance_id,
            "agent": claim.agent,
            "outcome": outcome.outcome,
            "error_class": outcome.error_class,
            "error": outcome.error,
            "detail": outcome.detail,
        }

    def _changed(self) -> None:
        mirror.sync(self.runtime)
        self.wake()

    def wake(self) -> None:
        """Tell the scheduler to re-plan (a timer was added or changed outside this service)."""
        for listener in self.listeners:
            listener()


def _not_found(timer_id: str) -> TimerError:
    """Unknown ids and other agents' timers read the same (ids do not leak)."""
    return TimerError("timer_not_found", f"No timer has id {timer_id!r}.", timer_id=timer_id)


def _refuse_cancel(timer_id: str, status: str) -> None:
    if status == "cancelled":
        raise TimerError("timer_already_cancelled", "The timer was already cancelled.", timer_id=timer_id)
    raise TimerError(
        "timer_already_completed",
        "The one-shot timer already fired; there is nothing left to cancel.",
        timer_id=timer_id,
        status=status,
    )


def _request_open(now: datetime) -> Any:
    """The timer's request is still pending and unexpired at ``now`` (a correlated EXISTS, so the claim's
    conditional UPDATE checks it atomically with taking the firing)."""
    return exists().where(
        hitl_requests.c.id == timers.c.request_id,
        hitl_requests.c.status == "pending",
        hitl_requests.c.expires_epoch > now.timestamp(),
    )
