"""Live inbox and console: a server-sent event stream (``sse-starlette``) that tells an open page when
something changed, and how many requests wait.

Every change worth showing (a request created, decided or expired; a subagent or timer moving) appends
a receipt, so the receipt chain's head is the store's version: the stream looks at it once per
``POLL_SECONDS`` (one primary-key read, shared by every process and replica on the store) and, when it
moved, sends ``state`` with the pending count (capped: baton.hitl.pending_count) and the new version. ``/inbox/static/live.js`` (same
origin, allowed by the CSP's ``script-src 'self'``; no inline script anywhere) puts the count in the
tab's title and reloads a list page, or offers a reload on a page where a person may be typing; a
request's page follows its own request (``?request=ID``) and swaps its buttons for the outcome once
someone else decided it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import Response

from baton.hitl.pending_count import PendingCount, capped_count
from baton.runtime import Runtime
from baton.store.schema import hitl_approvals, hitl_requests, receipt_head

POLL_SECONDS = 1.0
PING_SECONDS = 15
STATIC = Path(__file__).parent / "static"


_PENDING_COUNT = select(capped_count(hitl_requests.c.status == "pending"))


def state(runtime: Runtime, request_id: str | None = None) -> dict[str, Any]:
    """The pending count (``pending_exact`` false past ``COUNT_CAP``) and the store's version (the receipt
    chain's head seq); with ``request_id`` (a request's page), that request's status, who decided it and
    who approved it so far, so the page can show an outcome instead of buttons that no longer decide."""
    with runtime.store.read() as connection:
        head = connection.execute(select(receipt_head.c.seq)).scalar()
        pending = PendingCount.read(int(connection.execute(_PENDING_COUNT).scalar() or 0))
        found = _request(connection, request_id) if request_id else None
    current = {"pending": pending.total, "pending_exact": pending.exact, "version": int(head or 0)}
    return {**current, "request": found} if found else current


def _request(connection: Any, request_id: str) -> dict[str, Any] | None:
    """One request's status, decider and approvers (None when there is no such request)."""
    row = connection.execute(
        select(hitl_requests.c.status, hitl_requests.c.decided_by, hitl_requests.c.required_approvals).where(
            hitl_requests.c.id == request_id
        )
    ).first()
    if row is None:
        return None
    approvals = select(hitl_approvals.c.person).where(hitl_approvals.c.request_id == request_id)
    people = connection.execute(approvals.order_by(hitl_approvals.c.approved_at)).scalars().all()
    return {
        "status": row.status,
        "decided_by": row.decided_by,
        "approvals": list(people),
        "required_approvals": row.required_approvals or 1,
    }


async def changes(
    runtime: Runtime, request: Request, poll_seconds: float = POLL_SECONDS
) -> AsyncIterator[dict[str, Any]]:
    """``state`` events: the current one at once, then one each time the version moves."""
    last: dict[str, Any] | None = None
    request_id = request.query_params.get("request") or None
    while not await request.is_disconnected():
        current = await anyio.to_thread.run_sync(state, runtime, request_id)
        if current != last:
            yield {"event": "state", "data": json.dumps(current)}
            last = current
        await anyio.sleep(poll_seconds)


def stream(runtime: Runtime, request: Request, headers: dict[str, str]) -> Response:
    """The event-stream response (no-store, never buffered by a proxy)."""
    from sse_starlette.sse import EventSourceResponse

    return EventSourceResponse(
        changes(runtime, request),
        ping=PING_SECONDS,
        headers={**headers, "X-Accel-Buffering": "no"},
    )


def script() -> bytes:
    """The page script that listens to the stream."""
    return (STATIC / "live.js").read_bytes()
