"""The draft MCP Events extension (experimental, ``BATON_EXPERIMENTAL_EVENTS=1``): ``events/list``,
``events/stream`` (push) and ``events/poll`` for the three events of :mod:`baton.events.catalog`.

The draft is the Triggers & Events working group's design sketch (modelcontextprotocol/
experimental-ext-triggers-events, ``docs/design-sketch-proposal.md``, "Status: Draft proposal"). It names
no extension identifier and puts its capability at ``capabilities.events``, a key the SDK's typed server
capabilities cannot carry, so baton declares it as ``capabilities.experimental.events``. Webhook delivery
(``events/subscribe``) is not offered. Off by default: then none of these methods exists and nothing of
this is sent.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field

from baton import clock
from baton.events import catalog
from baton.runtime import Runtime

#: How often a push stream looks at the receipt head (a change by any process or replica shows up then).
POLL_SECONDS = 0.5
#: The draft wants a heartbeat at least every 30 s; a quiet stream sends one this often.
HEARTBEAT_SECONDS = 15.0
#: What ``events/poll`` tells a client to wait before its next poll.
NEXT_POLL_MS = 2000
#: Open push streams per process; one more is ``ResourceExhausted``.
MAX_STREAMS = 256
NOT_FOUND = -32011
RESOURCE_EXHAUSTED = -32013
CAPABILITY = {"listChanged": False}


class Loader(Protocol):
    """Where the runtime comes from once the server has loaded it (the server's registry loader)."""

    async def get(self) -> Any: ...


class StreamParams(BaseModel):
    """``events/stream`` params: one subscription."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", defer_build=True)
    name: str = Field(max_length=64)
    arguments: dict[str, Any] | None = None
    cursor: str | None = Field(default=None, max_length=32)
    max_age_ms: int | None = Field(default=None, alias="maxAgeMs", ge=0)


class PollParams(StreamParams):
    """``events/poll`` params: one subscription, and how many receipts one answer may scan."""

    max_events: int | None = Field(default=None, alias="maxEvents", ge=1, le=catalog.PAGE)


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def _resolve(params: StreamParams) -> tuple[catalog.EventType, dict[str, Any]]:
    """The event type and its checked arguments (only its one optional id filter, a short string)."""
    event = catalog.EVENT_TYPES.get(params.name)
    if event is None:
        raise MCPError(code=NOT_FOUND, message="NotFound", data={"kind": "event"})
    arguments = params.arguments or {}
    unknown = set(arguments) - {event.id_argument}
    wanted = arguments.get(event.id_argument)
    if unknown or (wanted is not None and not (isinstance(wanted, str) and 0 < len(wanted) <= 64)):
        raise _invalid(f"{event.name} takes only an optional string {event.id_argument}.")
    return event, arguments


def _start(runtime: Runtime, params: StreamParams) -> tuple[int, bool]:
    """Where delivery begins (a null cursor: now) and whether ``maxAgeMs`` skipped past the cursor."""
    if params.cursor is None:
        return catalog.head(runtime.store), False
    after = catalog.parse_cursor(params.cursor, runtime.store)
    if after is None:
        raise _invalid("cursor is not one this server gave.")
    if params.max_age_ms is not None:
        floor = catalog.age_floor(runtime.store, params.max_age_ms)
        if floor > after:
            return floor, True
    return after, False


async def _send(ctx: Any, method: str, params: dict[str, Any]) -> None:
    notification = types.Notification[dict[str, Any], str](method=method, params=params)
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


class EventsExtension:
    """The three methods, each answering for the agent behind the request."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.open_streams = 0

    async def _caller(self, ctx: Any) -> tuple[Runtime, str | None]:
        from baton.identity.agents import current_agent

        runtime: Runtime = (await self.loader.get()).runtime
        return runtime, current_agent(ctx, runtime.settings).write_scope

    async def list_events(self, ctx: Any, params: Any) -> dict[str, Any]:
        """``events/list``: the three event types."""
        return {"events": [event.listed() for event in catalog.EVENT_TYPES.values()]}

    async def poll(self, ctx: Any, params: PollParams) -> dict[str, Any]:
        """``events/poll``: the caller's occurrences after the cursor (none, and a fresh cursor, for null)."""
        event, arguments = _resolve(params)
        runtime, scope = await self._caller(ctx)
        after, truncated = await anyio.to_thread.run_sync(_start, runtime, params)
        page = catalog.Page([], str(after), False)
        if params.cursor is not None:
            limit = params.max_events or catalog.PAGE
            page = await anyio.to_thread.run_sync(
                catalog.read, runtime.store, event, scope, arguments, after, limit
            )
        answer = {
            "events": page.events,
            "cursor": page.cursor,
            "truncated": truncated,
            "hasMore": page.has_more,
        }
        return {**answer, "nextPollMs": NEXT_POLL_MS}

    async def stream(self, ctx: Any, params: StreamParams) -> dict[str, Any]:
        """``events/stream``: confirm, then push the caller's occurrences until the client cancels."""
        event, arguments = _resolve(params)
        if ctx.request_id is None:
            raise _invalid("events/stream requires a request id.")
        if self.open_streams >= MAX_STREAMS:
            raise MCPError(
                code=RESOURCE_EXHAUSTED, message="ResourceExhausted", data={"limit": "subscriptions"}
            )
        runtime, scope = await self._caller(ctx)
        after, truncated = await anyio.to_thread.run_sync(_start, runtime, params)
        self.open_streams += 1
        try:
            await self._push(ctx, runtime, (event, arguments, scope), after, truncated)
        finally:
            self.open_streams -= 1
        return {"_meta": {}}  # not reached: the client ends a stream by cancelling it

    async def _push(
        self,
        ctx: Any,
        runtime: Runtime,
        wanted: tuple[catalog.EventType, dict[str, Any], str | None],
        after: int,
        truncated: bool,
    ) -> None:
        from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

        event, arguments, scope = wanted
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        await _send(
            ctx, "notifications/events/active", {"cursor": str(after), "truncated": truncated, "_meta": meta}
        )
        last_sent = clock.monotonic()
        while True:
            page = await anyio.to_thread.run_sync(catalog.read, runtime.store, event, scope, arguments, after)
            for occurrence in page.events:
                await _send(ctx, "notifications/events/event", {**occurrence, "_meta": meta})
                last_sent = clock.monotonic()
            after = int(page.cursor)
            if page.has_more:
                continue
            if clock.monotonic() - last_sent >= HEARTBEAT_SECONDS:
                await _send(ctx, "notifications/events/heartbeat", {"cursor": page.cursor, "_meta": meta})
                last_sent = clock.monotonic()
            await anyio.sleep(POLL_SECONDS)


def install(server: Any, loader: Loader) -> None:
    """Serve the three methods and declare ``capabilities.experimental.events`` (initialize and discover)."""
    extension = EventsExtension(loader)
    server.add_request_handler("events/list", types.RequestParams, extension.list_events)
    server.add_request_handler("events/poll", PollParams, extension.poll)
    server.add_request_handler("events/stream", StreamParams, extension.stream)
    derive = server.get_capabilities

    def get_capabilities(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities: types.ServerCapabilities = derive(*args, **kwargs)
        capabilities.experimental = {**(capabilities.experimental or {}), "events": dict(CAPABILITY)}
        return capabilities

    server.get_capabilities = get_capabilities
