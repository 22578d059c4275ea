"""A stdio connection served in the era its client opens with; a handshake (2025) connection straight off stdin.

The SDK's ``Server.run`` (``serve_dual_era_loop``) peeks at the client's first request to choose the era,
then relays every later message through a memory stream and a task of its own into the chosen loop: one
more task switch on every request of the connection. A connection that opens with ``initialize`` is a
handshake connection for good (the SDK's own rule: ``initialize`` never opens the modern era), so baton
peeks itself and serves such a connection as the SDK's ``_serve_legacy_stream`` does (its loop-mode
dispatcher, ``Connection`` and ``ServerRunner``, all public; a 2026-07-28 enveloped request refused with the
same error), reading stdin directly. Any other opening goes to ``serve_dual_era_loop`` as before, the frames
read while peeking handed to it first, and it decides.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded, serve_dual_era_loop
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PROTOCOL_VERSION_META_KEY, JSONRPCRequest

#: Frames before the client's first request kept for the chosen loop (the SDK keeps as many).
REPLAY_LIMIT = 8


class Replaying:
    """A read stream handing out the frames read while peeking, then the rest of ``stream``'s."""

    def __init__(self, stream: Any, lead: deque[Any]) -> None:
        self._stream = stream
        self._lead = lead

    async def receive(self) -> Any:
        """The next frame (``anyio.EndOfStream`` at the end, as the stream below raises it)."""
        if self._lead:
            return self._lead.popleft()
        return await self._stream.receive()

    def __aiter__(self) -> Replaying:
        return self

    async def __anext__(self) -> Any:
        if self._lead:
            return self._lead.popleft()
        return await self._stream.__anext__()

    async def aclose(self) -> None:
        """Close the stream below."""
        self._lead.clear()
        await self._stream.aclose()

    async def __aenter__(self) -> Replaying:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _peek(stream: Any) -> tuple[deque[Any], JSONRPCRequest | None]:
    """The frames up to and including the first request (at most :data:`REPLAY_LIMIT` before it), and it."""
    lead: deque[Any] = deque()
    async for item in stream:
        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
            lead.append(item)
            return lead, item.message
        if len(lead) < REPLAY_LIMIT:
            lead.append(item)
    return lead, None


def modern_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether ``params._meta`` carries the 2026-07-28 envelope's protocol-version key (the SDK's rule)."""
    meta = params.get("_meta") if params else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


async def _serve_handshake(
    server: Any, read_stream: Any, write_stream: Any, state: Any, init_options: Any
) -> None:
    """A handshake connection, as the SDK serves one after its era check, without its relay."""
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
        read_stream, write_stream, inline_methods=frozenset({"initialize"})
    )
    connection = Connection.for_loop(dispatcher)
    runner = ServerRunner(server, connection, state, init_options=init_options)

    async def on_request(context: Any, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        if method != "initialize" and modern_envelope(params):
            raise MCPError(
                code=INVALID_REQUEST,
                message="this connection serves the handshake protocol era; "
                "requests carrying the 2026-07-28 envelope are not accepted on it",
            )
        return await runner.on_request(context, method, params)

    try:
        await dispatcher.run(on_request, runner.on_notify)
    finally:
        await aclose_shielded(connection)


async def serve(server: Any, read_stream: Any, write_stream: Any, init_options: Any) -> None:
    """``Server.run`` for one stdio connection: the lifespan entered, then the era's loop."""
    try:
        async with server.lifespan(server) as state:
            lead, opening = await _peek(read_stream)
            replayed = Replaying(read_stream, lead)
            if opening is not None and opening.method == "initialize":
                await _serve_handshake(server, replayed, write_stream, state, init_options)
            else:
                await serve_dual_era_loop(
                    server, replayed, write_stream, lifespan_state=state, init_options=init_options
                )
    finally:
        await write_stream.aclose()
        await read_stream.aclose()
