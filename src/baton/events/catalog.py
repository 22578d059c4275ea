"""The three events baton offers under the draft MCP Events extension, read from the receipt chain.

Each state change an event reports already appends a receipt in the transaction that makes it (a request
decided or expired, a timer fired, a subagent completed, failed or cancelled), so the chain is the event
log: a cursor is a receipt seq, replay from any cursor works across restarts and replicas, and a change
made by another process (``baton hitl approve``) is seen like one made here. An occurrence goes only to the
agent that owns the object (an operator caller sees every agent's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any

from sqlalchemy import select

from baton import clock
from baton.store.engine import Store
from baton.store.schema import hitl_requests, receipt_head, receipts, subagents

#: The most receipts one read scans (a poll's page; a stream reads again at once when a page was full).
PAGE = 200


@dataclass(frozen=True)
class EventType:
    """One event type as ``events/list`` shows it, and the receipt kinds it is made of."""

    name: str
    description: str
    id_argument: str
    kinds: frozenset[str]
    payload_schema: dict[str, Any] = field(default_factory=dict)

    def listed(self) -> dict[str, Any]:
        """The ``events/list`` entry (push and poll; no webhook)."""
        filter_property = {
            "type": "string",
            "maxLength": 64,
            "description": "Only this one; all when absent.",
        }
        return {
            "name": self.name,
            "description": self.description,
            "delivery": ["push", "poll"],
            "inputSchema": {
                "type": "object",
                "properties": {self.id_argument: filter_property},
                "additionalProperties": False,
            },
            "payloadSchema": self.payload_schema,
        }


def _schema(properties: dict[str, str], required: list[str]) -> dict[str, Any]:
    fields = {name: {"type": kind} for name, kind in properties.items()}
    return {"type": "object", "properties": fields, "required": required}


REQUEST_DECIDED = EventType(
    "hitl.request_decided",
    "One of your approval or input requests was approved, rejected, answered or expired.",
    "requestId",
    frozenset({"hitl_decided", "hitl_expired", "hitl_withdrawn"}),
    _schema({"requestId": "string", "status": "string", "decidedBy": "string"}, ["requestId", "status"]),
)
TIMER_FIRED = EventType(
    "timer.fired",
    "One of your timers fired.",
    "timerId",
    frozenset({"timer_fired"}),
    _schema({"timerId": "string", "name": "string", "outcome": "string"}, ["timerId", "outcome"]),
)
SUBAGENT_FINISHED = EventType(
    "subagent.finished",
    "One of your subagents completed, failed or was cancelled.",
    "subagentId",
    frozenset({"subagent_completed", "subagent_failed", "subagent_interrupted", "subagent_cancelled"}),
    _schema({"subagentId": "string", "status": "string", "errorClass": "string"}, ["subagentId", "status"]),
)
EVENT_TYPES = {kind.name: kind for kind in (REQUEST_DECIDED, TIMER_FIRED, SUBAGENT_FINISHED)}


@dataclass
class Page:
    """What one read found: the occurrences, the cursor after everything scanned, and whether more wait."""

    events: list[dict[str, Any]]
    cursor: str
    has_more: bool


def head(store: Store) -> int:
    """The receipt chain's head seq: the cursor of "now"."""
    with store.read() as connection:
        return int(connection.execute(select(receipt_head.c.seq)).scalar() or 0)


def parse_cursor(cursor: str | None, store: Store) -> int | None:
    """The seq a cursor names; None for a cursor this chain never gave (not digits, or past its head)."""
    if cursor is None or not cursor.isdigit() or len(cursor) > 19:
        return None
    seq = int(cursor)
    return seq if seq <= head(store) else None


def age_floor(store: Store, max_age_ms: int) -> int:
    """The last seq older than ``max_age_ms``: replay starts after it."""
    oldest = (clock.now().astimezone(UTC) - timedelta(milliseconds=max_age_ms)).isoformat()
    with store.read() as connection:
        first = connection.execute(
            select(receipts.c.seq).where(receipts.c.at >= oldest).order_by(receipts.c.seq).limit(1)
        ).scalar()
    return int(first) - 1 if first is not None else head(store)


def read(
    store: Store,
    event: EventType,
    scope: str | None,
    arguments: dict[str, Any],
    after: int,
    limit: int = PAGE,
) -> Page:
    """The occurrences of ``event`` after seq ``after`` that ``scope`` owns (None: every agent's)."""
    wanted = arguments.get(event.id_argument)
    with store.read() as connection:
        # the head first: a receipt committed after it waits for the next read, never skipped
        top = int(connection.execute(select(receipt_head.c.seq)).scalar() or 0)
        query = (
            select(receipts.c.seq, receipts.c.kind, receipts.c.at, receipts.c.payload)
            .where(receipts.c.seq > after, receipts.c.seq <= top, receipts.c.kind.in_(sorted(event.kinds)))
            .order_by(receipts.c.seq)
            .limit(limit)
        )
        rows = connection.execute(query).all()
        found = []
        for row in rows:
            payload = json.loads(row.payload)
            data, owner = _occurrence(connection, row.kind, payload)
            if wanted is not None and data.get(event.id_argument) != wanted:
                continue
            if scope is None or owner == scope:
                found.append(
                    {"eventId": f"receipt-{row.seq}", "name": event.name, "timestamp": row.at, "data": data}
                )
    has_more = len(rows) == limit
    cursor = int(rows[-1].seq) if has_more else max(top, after)
    for occurrence in found:
        occurrence["cursor"] = occurrence["eventId"].removeprefix("receipt-")
    return Page(found, str(cursor), has_more)


def _occurrence(connection: Any, kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """An occurrence's ``data`` (only what identifies and triages it) and the agent that owns its object."""
    if kind == "timer_fired":
        data = {
            "timerId": payload.get("timer_id"),
            "name": payload.get("name"),
            "outcome": payload.get("outcome"),
        }
        return data, payload.get("agent")
    if kind.startswith("hitl_"):
        request_id = payload.get("request_id")
        status = payload.get("decision") if kind == "hitl_decided" else "expired"
        data = {"requestId": request_id, "status": status, "decidedBy": payload.get("decided_by")}
        owner = connection.execute(
            select(hitl_requests.c.agent).where(hitl_requests.c.id == request_id)
        ).scalar()
        return data, owner
    subagent_id = payload.get("subagent_id")
    status = {"subagent_completed": "completed", "subagent_cancelled": "cancelled"}.get(kind, "failed")
    error_class = "interrupted_by_restart" if kind == "subagent_interrupted" else payload.get("error_class")
    data = {"subagentId": subagent_id, "status": status, "errorClass": error_class}
    owner = connection.execute(select(subagents.c.agent).where(subagents.c.id == subagent_id)).scalar()
    return data, owner
