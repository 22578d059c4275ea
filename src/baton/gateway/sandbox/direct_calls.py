"""A proxied ``tools/call`` on the upstream's pipes, its answer routed back by id, past the SDK's request machinery.

The session (``mcp.ClientSession``) still owns the connection: the handshake, ``tools/list``, notifications,
the upstream's own requests (``roots/list``) and any answer to an id baton did not issue here. A proxied
call only needs its line written and the line carrying its id back: the session's ``send_request`` wraps
that in a dispatcher, a trace span, a request clock, two memory streams and a task switch, which was a
fifth of the server's work per hop. Ids start at :data:`FIRST_ID`, far above the session's own counter.

The answer is checked as ``ClientSession.send_request`` checks it (the negotiated version's result shape,
a later revision's fields dropped, then ``CallToolResult``); the caller still runs the session's
``validate_tool_result``. An error answer raises ``MCPError`` and the connection's end raises it with
``CONNECTION_CLOSED``, as the session does, so the caller's handling is the same either way. The caller's
trace context goes in ``_meta`` as the session puts it there; a process that exports spans keeps the
session's path, whose client span this path does not make.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from functools import cache
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types import methods as result_surfaces
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry.propagate import inject
from pydantic import TypeAdapter

if TYPE_CHECKING:
    from baton.gateway.sandbox.transport import _Messages

#: baton's first request id on a connection: far above the session's own ids (it counts from 0), and still a
#: 32-bit integer for the many servers that parse an id into one.
FIRST_ID = 1 << 30
METHOD = "tools/call"
#: How long a courtesy ``notifications/cancelled`` may take when the caller gave up.
CANCEL_WRITE_SECONDS = 1.0


class _Waiter:
    """One call in flight: its answer's JSON-RPC message once it came."""

    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: dict[str, Any] | None = None


def direct_version(version: str | None) -> bool:
    """Whether a session of ``version`` may take the direct path (a modern session may answer a call with a
    request for input, which only the session's own ``call_tool`` knows how to refuse)."""
    return (
        version is not None and version in KNOWN_PROTOCOL_VERSIONS and version not in MODERN_PROTOCOL_VERSIONS
    )


@cache
def _wire_fields(version: str) -> frozenset[str]:
    """The top-level keys of a ``tools/call`` result at ``version`` (empty when the SDK has no row)."""
    target = result_surfaces.SERVER_RESULTS.get((METHOD, version))
    members = getattr(target, "__args__", (target,))
    fields: set[str] = set()
    for model in members:
        for name, field in getattr(model, "model_fields", {}).items():
            fields.add(field.alias or name)
    return frozenset(fields)


@cache
def _surface(version: str) -> TypeAdapter[Any] | None:
    """The negotiated version's ``tools/call`` result shape (None when the SDK has no row: not checked)."""
    target: Any = result_surfaces.SERVER_RESULTS.get((METHOD, version))
    return TypeAdapter(target) if target is not None else None


@cache
def later_fields(version: str) -> frozenset[str]:
    """A ``tools/call`` result's keys that only a revision newer than ``version`` declares (dropped before
    parsing, as the session drops them: outside the negotiated contract)."""
    newer = KNOWN_PROTOCOL_VERSIONS[KNOWN_PROTOCOL_VERSIONS.index(version) + 1 :]
    later: set[str] = set()
    for revision in newer:
        later |= _wire_fields(revision)
    return frozenset(later) - _wire_fields(version) if _wire_fields(version) else frozenset()


def parse_result(raw: dict[str, Any], version: str) -> types.CallToolResult:
    """The answer's ``result`` checked against the negotiated version, then as a ``CallToolResult``."""
    surface = _surface(version)
    if surface is not None:  # validate_server_result without the dump it makes and drops
        surface.validate_python(raw, by_name=False)
    if not (foreign := later_fields(version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return types.CallToolResult.model_validate(raw, by_name=False)


class DirectCalls:
    """baton's own ``tools/call`` requests on one upstream connection, and the answers claimed for them."""

    def __init__(self, messages: _Messages) -> None:
        self._messages = messages
        self._ids = itertools.count(FIRST_ID)
        self._pending: dict[int, _Waiter] = {}
        self._closed = False

    def claim(self, line: bytes) -> bool:
        """Whether ``line`` answers a call in flight here (it is then this module's, not the session's)."""
        if not self._pending:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if (
            not isinstance(message, dict)
            or "method" in message
            or not ("result" in message or "error" in message)
        ):
            return False
        request_id = message.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return False
        key = coerce_request_id(request_id)  # "7" and 7 are one id, as the SDK's dispatcher correlates them
        waiter = self._pending.get(key) if isinstance(key, int) else None
        if waiter is None:
            return False
        waiter.answer = message
        waiter.done.set()
        return True

    def close(self) -> None:
        """The connection ended: every call in flight fails as closed."""
        self._closed = True
        for waiter in self._pending.values():
            waiter.done.set()

    async def call(self, tool: str, arguments: dict[str, Any], version: str) -> types.CallToolResult:
        """Send ``tools/call`` and wait for its answer; ``MCPError`` for an error answer or a closed line."""
        if self._closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        request_id = next(self._ids)
        waiter = self._pending[request_id] = _Waiter()
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        meta: dict[str, str] = {}
        inject(meta)  # the caller's trace context travels on, as the session's request carries it (SEP-414)
        if meta:
            params["_meta"] = meta
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": METHOD, "params": params})
        written = False
        try:
            try:
                await self._messages.write_line(line.encode("utf-8") + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            written = True
            await waiter.done.wait()
        except anyio.get_cancelled_exc_class():
            if written and waiter.answer is None:
                await self._cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        return self._answer(waiter.answer, version)

    @staticmethod
    def _answer(message: dict[str, Any] | None, version: str) -> types.CallToolResult:
        if message is None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        if "error" in message:
            error = types.ErrorData.model_validate(message["error"], by_name=False)
            raise MCPError(code=error.code, message=error.message, data=error.data)
        raw = message["result"]
        if not isinstance(raw, dict):
            raise ValueError(f"the upstream answered tools/call with a non-object result: {raw!r}")
        return parse_result(raw, version)

    async def _cancel(self, request_id: int) -> None:
        """Tell the upstream the caller gave up (the session's courtesy cancel; a dead pipe is ignored)."""
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "caller cancelled"},
        }
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(CANCEL_WRITE_SECONDS),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await self._messages.write_line(json.dumps(notice).encode("utf-8") + b"\n")
