"""The stdin side of ``baton serve``: every line gets an answer, even one the MCP SDK cannot parse.

The SDK's stdio transport drops a line it cannot validate (a 250-level nesting, a lone surrogate, a
5000-digit integer, plain garbage) without replying, so the client waits forever. This reader parses
each line with the SDK's own parser; a line that fails is answered here, on the server's write stream,
with a JSON-RPC error (``-32700`` when it is not JSON at all, ``-32602`` when it is a request the server
cannot accept, ``-32600`` when it is not a request), and is not passed on.

:class:`ScreenedStdin` is itself the read stream ``Server.run`` takes (the SDK's ``ReadStream``
protocol): the server's dispatcher gets each message parsed once, with no transport task and no memory
stream between the pipe and it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from baton.wire.stdio_in import LoopLines, StdinLines, ThreadLines, loop_capable

log = logging.getLogger("baton.wire.server")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
#: Integers longer than this are not turned into ints while looking for a bad line's id.
MAX_INT_DIGITS = 4000


class _KeptOpen(TextIOWrapper):
    """A text layer over stdin whose close never closes the process's stdin buffer."""

    def close(self) -> None:
        """Detach instead of closing."""
        with contextlib.suppress(ValueError):
            self.detach()


def _claim_stdin() -> Any:
    """The protocol's stdin on a private descriptor, with fd 0 pointed at /dev/null (as the SDK's own
    transport does), so a child process that inherits stdin can never read the client's messages."""
    try:
        import fcntl

        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError):
        return sys.stdin.buffer
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    except OSError:
        pass  # stdin stays shared, exactly as before
    return os.fdopen(private, "rb")


class _TooLong:
    """Stands in for an integer too long to convert."""


def _bounded_int(text: str) -> Any:
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else _TooLong()


class ScreenedStdin:
    """The server's read stream over stdin: each parseable line as a ``SessionMessage``; the others answered.

    A line longer than ``max_chars`` (``BATON_MAX_MESSAGE_BYTES``) is read through and dropped without
    being parsed or kept, and answered ``-32600`` (with its id when the id appears near its start).
    """

    def __init__(self, max_chars: int = 4 * 1024 * 1024, source: Any = None) -> None:
        #: ``source``: a text file read in a worker thread; by default the process's stdin, read on the
        #: event loop when it is a pipe or a socket (:mod:`baton.wire.stdio_in`).
        self._reader: StdinLines = (
            ThreadLines(source, max_chars) if source is not None else _stdin_lines(max_chars)
        )
        self.max_chars = max_chars
        self._replies: Any = None
        self._attached = anyio.Event()
        self._ended = False

    def attach(self, write_stream: Any) -> None:
        """The stream the server writes its messages to (answers go out in order with them)."""
        self._replies = write_stream
        self._attached.set()

    # the SDK's ReadStream protocol (what ``Server.run`` reads)
    async def receive(self) -> SessionMessage:
        """The next line the SDK can parse, parsed once; ``anyio.EndOfStream`` at the end of stdin."""
        message = await self.next_message()
        if message is None:
            raise anyio.EndOfStream
        return SessionMessage(message)

    def __aiter__(self) -> ScreenedStdin:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop reading stdin."""
        self._ended = True
        self._reader.close()

    async def __aenter__(self) -> ScreenedStdin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def next_message(self) -> Any:
        """The next message the SDK can parse, or None at the end of stdin; every other line is answered
        here (when JSON-RPC allows an answer) and skipped."""
        await self._attached.wait()
        while not self._ended:
            line, oversized = await self._reader.read()
            if oversized:
                await self._send(
                    _leading_id(line),
                    INVALID_REQUEST,
                    f"Invalid request: the message is larger than {self.max_chars} bytes (BATON_MAX_MESSAGE_BYTES).",
                )
                continue
            if not line:
                await self.aclose()
                break
            if not line.strip():
                continue
            try:
                return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:
                await self._answer(line, exc)
        return None

    async def _answer(self, line: str, exc: Exception) -> None:
        """Reply to a line the SDK refused, when JSON-RPC allows a reply."""
        reason = _reason(exc)
        try:
            parsed = json.loads(line, parse_int=_bounded_int)
        except (ValueError, RecursionError):
            await self._send(None, PARSE_ERROR, f"Parse error: {reason}")
            return
        if not isinstance(parsed, dict):
            await self._send(None, INVALID_REQUEST, "Invalid request: a message must be a JSON object.")
            return
        request_id = _usable_id(parsed.get("id"))
        if "id" not in parsed or ("method" not in parsed and ("result" in parsed or "error" in parsed)):
            log.warning("dropped an unreadable notification or response: %s", reason)
            return  # JSON-RPC answers neither notifications nor responses
        if parsed.get("jsonrpc") != "2.0" or not isinstance(parsed.get("method"), str) or request_id is None:
            await self._send(request_id, INVALID_REQUEST, f"Invalid request: {reason}")
            return
        await self._send(request_id, INVALID_PARAMS, f"Invalid params: {reason}")

    async def _send(self, request_id: str | int | None, code: int, message: str) -> None:
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message[:500])
        )
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):  # the client left
            await self._replies.send(SessionMessage(error))


def _stdin_lines(max_chars: int) -> StdinLines:
    """The process's stdin on a private descriptor (see :func:`_claim_stdin`): read on the event loop
    when it is a pipe or a socket, otherwise as text in a worker thread."""
    claimed = _claim_stdin()
    with contextlib.suppress(OSError, ValueError):
        fd = claimed.fileno()
        if fd > 2 and loop_capable(fd):
            return LoopLines(fd, max_chars, keep=claimed)
    return ThreadLines(_KeptOpen(claimed, encoding="utf-8", errors="replace"), max_chars)


_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]{0,200})"|-?\d{1,18})\s*[,}]')


def _leading_id(head: str) -> str | int | None:
    """The id of a request cut short, when it appears in its first bytes."""
    match = _ID.search(head)
    return _usable_id(json.loads(match.group(1))) if match else None


def _usable_id(value: Any) -> str | int | None:
    """A request id we can echo: a printable string or a bounded int (never a bool)."""
    if isinstance(value, (bool, _TooLong)):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and len(value) <= 200:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return None


def _reason(exc: Exception) -> str:
    """The parser's complaint without the offending input."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in first.get("loc", ()))
            return f"{first.get('msg', 'invalid message')}" + (f" (at {where})" if where else "")
        except Exception:  # noqa: S110 (fall back to the exception's class name below)
            pass
    return type(exc).__name__
