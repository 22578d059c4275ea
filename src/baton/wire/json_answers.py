"""A quiet tool's call over streamable HTTP is answered as one JSON body instead of an SSE stream.

The MCP spec lets a server answer any POST with ``application/json`` or with ``text/event-stream``, and a
client that accepts both must read either. The SSE stream is what carries a call's progress, elicitation
and log lines (and, during a long call, keep-alive pings through a proxy); a tool that sends none of them
and answers promptly (``ToolSpec.quiet``: ``mcp_ping``, the listing and status tools) has only its result
to send, and the SDK's stream costs about 40 % of the server's CPU per call under load
(docs/benchmarks.md, "#51: streamable HTTP throughput and tail").

The SDK chooses between the two per server (``json_response``), not per request, so baton passes it
:data:`PER_REQUEST`, a flag that is true only inside a request :class:`JsonAnswers` chose. This relies on
how SDK 2.3 reads the flag: stored as given, read by truthiness while it handles that request's POST
(``tests/test_json_answers.py`` fails when that changes). A request is chosen only when all hold:

* it is a POST to ``/mcp`` of an established session (``Mcp-Session-Id``: never the request that opens
  one, so the session's own task, which routes its messages, always reads the flag false);
* its client accepts both ``application/json`` and ``text/event-stream`` (as the SSE answer requires);
* its body, complete in the first chunk, is one JSON-RPC ``tools/call`` request, not a task, naming a
  quiet built-in tool.

Inside such a request the call gets no progress reporter and no session (:func:`answered_as_json`), so
nothing but its result can be written for it, whatever the tool does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from baton.http.asgi import ASGIApp, Scope

_ANSWERED_AS_JSON: ContextVar[bool] = ContextVar("baton_answered_as_json", default=False)


def answered_as_json() -> bool:
    """Whether the request being handled is answered as one JSON body (it has no stream to write to)."""
    return _ANSWERED_AS_JSON.get()


class PerRequestJson:
    """The SDK's ``json_response`` flag: true only while a request chosen by :class:`JsonAnswers` is handled."""

    def __bool__(self) -> bool:
        """Read by the SDK for each request it handles."""
        return _ANSWERED_AS_JSON.get()


PER_REQUEST = PerRequestJson()


class JsonAnswers:
    """ASGI: marks the ``POST /mcp`` requests whose answer is one JSON body (see the module)."""

    def __init__(self, app: ASGIApp, quiet: Callable[[str], bool], path: str = "/mcp") -> None:
        from mcp.server.streamable_http import check_accept_headers  # HTTP only: stdio never loads these
        from starlette.requests import Request

        self.request = Request
        self.app = app
        self.quiet = quiet
        self.path = path
        self.accepts = check_accept_headers

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Read the first body chunk, decide, and hand the request on with that chunk replayed."""
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") != self.path
            or not self.in_session_accepting_both(scope)
        ):
            await self.app(scope, receive, send)
            return
        first: dict[str, Any] = await receive()
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        complete = first.get("type") == "http.request" and not first.get("more_body", False)
        if not (complete and self.eligible(first.get("body", b""))):
            await self.app(scope, replay, send)
            return
        token = _ANSWERED_AS_JSON.set(True)
        try:
            await self.app(scope, replay, send)
        finally:
            _ANSWERED_AS_JSON.reset(token)

    def eligible(self, body: bytes) -> bool:
        """Whether ``body`` is one ``tools/call`` request, not a task, of a quiet tool."""
        try:
            message = json.loads(body)
        except ValueError:
            return False  # the SDK answers the parse error
        if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
            return False
        params = message.get("params")
        if not isinstance(params, dict) or "task" in params:
            return False
        name = params.get("name")
        return isinstance(name, str) and self.quiet(name)

    def in_session_accepting_both(self, scope: Scope) -> bool:
        """An established session's request whose client accepts JSON and SSE (the SDK's own Accept check)."""
        headers = scope.get("headers") or []
        if not any(key == b"mcp-session-id" for key, _ in headers):
            return False
        has_json, has_sse = self.accepts(self.request(scope))
        return bool(has_json and has_sse)
