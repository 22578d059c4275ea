"""anyio streams to a sandboxed MCP server: the SDK's stdio transport, but with the process in our hands.

The SDK's ``stdio_client`` cannot start the child as another user and does not expose the process; the
proxy needs both (bwrap runs as host uid 65534, and a dead upstream must be noticed before a call is
sent to it). Messages are parsed exactly as the SDK parses them.

The session's streams are the pipes themselves (the SDK's ``ReadStream``/``WriteStream`` protocols): a
message is written by the task that sends it and a line is parsed by the session's own receive loop, with
no reader or writer task and no memory stream between, which took two task switches per call.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream, Process
from mcp.shared.message import SessionMessage

from baton.gateway.sandbox.bwrap_command import HOST_PATH
from baton.gateway.sandbox.direct_calls import DirectCalls
from baton.gateway.sandbox.sandbox import as_nobody
from baton.gateway.sandbox.stderr import StderrLog

#: Larger than the replay's cap: a screenshot travels as one base64 line.
MAX_LINE_BYTES = 32 * 1024 * 1024


@dataclass
class Pipe:
    """The session's streams plus the process behind them."""

    read: Any
    write: Any
    process: Process
    #: baton's own ``tools/call`` requests on these pipes (:mod:`~baton.gateway.sandbox.direct_calls`).
    calls: DirectCalls

    def alive(self) -> bool:
        """Whether the sandbox process is still running."""
        return self.process.returncode is None


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


class _Lines(ObjectReceiveStream[SessionMessage | Exception]):
    """The upstream's stdout as the session's read stream: each line parsed when the session asks for it.

    An unparsable line is handed over as its exception (the session logs it), as the SDK's transport
    does; an oversized line kills the upstream; stdout's end is the stream's end. A line answering one of
    ``calls``' requests goes to it, never to the session; the stream's end fails those still waiting.
    """

    def __init__(self, process: Process, calls: DirectCalls | None = None) -> None:
        assert process.stdout is not None
        self._process = process
        self._calls = calls
        self._stdout = process.stdout
        self._lines: deque[bytes] = deque()
        self._buffer = b""
        self._ended = False

    async def receive(self) -> SessionMessage | Exception:
        """The next message (or unparsable line's error); ``EndOfStream`` once stdout ends."""
        while True:
            line = await self._next_line()
            if line is None:
                return ValueError("the upstream wrote an oversized line")
            if self._calls is None or not self._calls.claim(line):
                return _parse(line)

    async def _next_line(self) -> bytes | None:
        """The next non-empty line (None for an oversized one, which kills the upstream)."""
        while not self._lines:
            if self._ended:
                if self._calls is not None:
                    self._calls.close()
                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._ended = True
                continue
            if b"\n" not in chunk:
                self._buffer += chunk
                if len(self._buffer) > MAX_LINE_BYTES:
                    self._ended = True
                    self._process.kill()
                    return None
                continue
            *lines, self._buffer = (self._buffer + chunk).split(b"\n")
            self._lines.extend(line for line in lines if line.strip())
        return self._lines.popleft()

    async def aclose(self) -> None:
        """Stop reading (the process itself is stopped by :func:`sandboxed_stdio`)."""
        self._ended = True
        self._lines.clear()
        if self._calls is not None:
            self._calls.close()


class _Messages(ObjectSendStream[SessionMessage]):
    """The upstream's stdin as the session's write stream: each message written as one line by its sender.

    A dead stdin raises ``BrokenResourceError`` (the session answers the call ``CONNECTION_CLOSED``, and
    the upstream is restarted on the next call) instead of hanging the session.
    """

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        self._stdin = process.stdin
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage) -> None:
        """Write ``item`` as one JSON line."""
        await self.write_line(
            item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        )

    async def write_line(self, data: bytes) -> None:
        """Write one finished line (``BrokenResourceError`` once stdin is dead)."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        try:
            await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError, RuntimeError) as exc:
            self._broken = True
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """Refuse further sends (stdin itself is closed by :func:`sandboxed_stdio`)."""
        self._closed = True


@contextlib.asynccontextmanager
async def sandboxed_stdio(
    argv: list[str],
    stderr: StderrLog,
    kill_timeout: float,
    started: Callable[[int], None] | None = None,
) -> AsyncIterator[Pipe]:
    """Start ``argv`` (the full prlimit … bwrap … command) as uid 65534 and yield its MCP streams.

    stderr is drained into ``stderr`` (capped); it never blocks the server or grows without end.
    """
    user, gid, groups = as_nobody()
    process = await anyio.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": HOST_PATH},
        user=user,
        group=gid,
        extra_groups=groups,
    )
    if started is not None:
        try:
            started(process.pid)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()
            raise
    write_stream = _Messages(process)
    calls = DirectCalls(write_stream)
    read_stream = _Lines(process, calls)
    async with anyio.create_task_group() as group:
        group.start_soon(_drain_stderr, process, stderr)
        try:
            yield Pipe(read_stream, write_stream, process, calls)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, kill_timeout)
                for stream in (read_stream, write_stream):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _drain_stderr(process: Process, log: StderrLog) -> None:
    """Copy stderr into the capped log until EOF."""
    assert process.stderr is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stderr:
            log.write(chunk)


async def _stop(process: Process, grace: float) -> None:
    """Close stdin, give the server ``grace`` seconds, then terminate and kill (bwrap takes the tree)."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        with anyio.move_on_after(grace):
            await process.wait()
        if process.returncode is not None:
            return
