"""The stdio transport of ``baton serve``: JSON-RPC lines on stdin and stdout, each parsed or written once.

The SDK's ``stdio_server`` (with baton's screen in front) parsed each line twice and wrote each message
with two thread hops (write, then flush); on a busy 2-core machine each hop is a thread wake-up on the
critical path of every call. Here each line is parsed once (the screen in :mod:`baton.stdio_guard`
answers what fails) and each message is written in one hop. Lines are still read in a worker thread:
reading stdin on the event loop (a non-blocking pipe) made a cheap call faster but the gateway's proxied
call slower (1.48x FastMCP's proxy against 0.85x, side by side; docs/benchmarks.md).

Like the SDK's transport, the protocol's descriptors are private copies: fd 0 reads ``/dev/null`` and
fd 1 writes to stderr while serving, so a child process or a stray print never touches the wire.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from baton.stdio_guard import ScreenedStdin


def _private_copy(fd: int) -> int | None:
    """A close-on-exec duplicate of ``fd`` above the standard descriptors, or None."""
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError):
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.asynccontextmanager
async def stdio_streams(max_message_bytes: int) -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams over this process's stdin and stdout."""
    stdin_fd = _private_copy(0)
    stdout_fd = _private_copy(1)
    if stdin_fd is None or stdout_fd is None:  # no fcntl: the plain thread path on the shared descriptors
        stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
        restore_stdout = False
    else:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
        with contextlib.suppress(OSError):
            os.dup2(2, 1)  # a stray write to stdout lands on stderr, never on the wire
        restore_stdout = True
    source = os.fdopen(stdin_fd, "r", encoding="utf-8", errors="replace", closefd=False)
    screen = ScreenedStdin(max_message_bytes, source=source)

    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    screen.attach(write_stream)

    async def reader() -> None:
        async with read_writer:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for message in screen.messages():
                    await read_writer.send(message)

    async def writer() -> None:
        async with write_reader:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, BrokenPipeError):
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    # one thread hop: a pipe write wakes the client, which may take the CPU at once;
                    # the loop thread must not be the one left waiting to get it back
                    await anyio.to_thread.run_sync(_write_all, stdout_fd, data.encode("utf-8") + b"\n")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            yield read_stream, write_stream
    finally:
        if restore_stdout:
            with contextlib.suppress(OSError):
                os.dup2(stdout_fd, 1)
