"""anyio streams to a sandboxed MCP server: the SDK's stdio transport, but with the process in our hands.

The SDK's ``stdio_client`` cannot start the child as another user and does not expose the process; the
proxy needs both (bwrap runs as host uid 65534, and a dead upstream must be noticed before a call is
sent to it). Messages are parsed exactly as the SDK parses them.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp.shared.message import SessionMessage

from baton.gateway.sandbox import HOST_PATH, as_nobody
from baton.gateway.stderr import StderrLog

#: Larger than the replay's cap: a screenshot travels as one base64 line.
MAX_LINE_BYTES = 32 * 1024 * 1024


@dataclass
class Pipe:
    """The session's streams plus the process behind them."""

    read: Any
    write: Any
    process: Process

    def alive(self) -> bool:
        """Whether the sandbox process is still running."""
        return self.process.returncode is None


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


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
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async with anyio.create_task_group() as group:
        group.start_soon(_read_lines, process, read_writer)
        group.start_soon(_drain_stderr, process, stderr)
        group.start_soon(_write_lines, process, write_reader, read_writer)
        try:
            yield Pipe(read_stream, write_stream, process)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, kill_timeout)
                for stream in (read_stream, write_stream):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _read_lines(process: Process, sink: Any) -> None:
    """Parse each stdout line into the session's read stream; an oversized line kills the upstream."""
    assert process.stdout is not None
    buffer = b""
    async with sink:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stdout:
                if b"\n" not in chunk:
                    buffer += chunk
                    if len(buffer) > MAX_LINE_BYTES:
                        await sink.send(ValueError("the upstream wrote an oversized line"))
                        process.kill()
                        return
                    continue
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        await sink.send(_parse(line))


async def _drain_stderr(process: Process, log: StderrLog) -> None:
    """Copy stderr into the capped log until EOF."""
    assert process.stderr is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stderr:
            log.write(chunk)


async def _write_lines(process: Process, source: Any, read_sink: Any) -> None:
    """Write each outgoing message as one line; a dead stdin ends the session instead of hanging it."""
    assert process.stdin is not None
    async with source:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for message in source:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode("utf-8") + b"\n")
    await read_sink.aclose()


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
