"""Live inbox and console: a server-sent event stream (``sse-starlette``) that tells an open page when
something changed, and how many requests wait.

Every change worth showing (a request created, decided or expired; a subagent or timer moving) appends
a receipt, so the receipt chain's head is the store's version: the stream looks at it once per
``POLL_SECONDS`` (one primary-key read, shared by every process and replica on the store) and, when it
moved, sends ``state`` with the pending count (capped: baton.hitl.pending_count) and the new version. ``/inbox/static/live.js`` (same
origin, allowed by the CSP's ``script-src 'self'``; no inline script anywhere) puts the count in the
tab's title and reloads a list page, or offers a reload on a page where a person may be typing.
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
from baton.schema import hitl_requests, receipt_head

POLL_SECONDS = 1.0
PING_SECONDS = 15
STATIC = Path(__file__).parent / "static"


_PENDING_COUNT = select(capped_count(hitl_requests.c.status == "pending"))


def state(runtime: Runtime) -> dict[str, Any]:
    """The pending count (``pending_exact`` false past ``COUNT_CAP``) and the store's version (the receipt
    chain's head seq)."""
    with runtime.store.read() as connection:
        head = connection.execute(select(receipt_head.c.seq)).scalar()
        pending = PendingCount.read(int(connection.execute(_PENDING_COUNT).scalar() or 0))
    return {"pending": pending.total, "pending_exact": pending.exact, "version": int(head or 0)}


async def changes(
    runtime: Runtime, request: Request, poll_seconds: float = POLL_SECONDS
) -> AsyncIterator[dict[str, Any]]:
    """``state`` events: the current one at once, then one each time the version moves."""
    last: dict[str, Any] | None = None
    while not await request.is_disconnected():
        current = await anyio.to_thread.run_sync(state, runtime)
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
