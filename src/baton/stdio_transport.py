"""The stdio transport of ``baton serve``: JSON-RPC lines on stdin and stdout, read and written on the loop.

The SDK's ``stdio_server`` reads each line in a worker thread and writes each message with two more
thread hops (write, then flush); on a busy 2-core machine each hop is a thread wake-up on the critical
path of every call. Here, when stdin and stdout are pipes or sockets, both are non-blocking descriptors
served by the event loop (``anyio.wait_readable``/``wait_writable``); a terminal or a regular file keeps
the thread path. Each line is parsed once (the screen in :mod:`baton.stdio_guard` answers what fails).

Like the SDK's transport, the protocol's descriptors are private copies: fd 0 reads ``/dev/null`` and
fd 1 writes to stderr while serving, so a child process or a stray print never touches the wire.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from baton.stdio_guard import ScreenedStdin

#: Bytes read from stdin per system call on the loop path.
READ_CHUNK = 256 * 1024


def _private_copy(fd: int) -> int | None:
    """A close-on-exec duplicate of ``fd`` above the standard descriptors, or None."""
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError):
        return None


def _loop_capable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd``: a pipe or a socket (never a terminal or a regular file)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LoopLines:
    """Lines of a non-blocking pipe read on the event loop: ``(line, oversized)`` as ``_read_line`` gives."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        """Read one chunk into the buffer; False at end of input."""
        while True:
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
                return False
            self._buffer += chunk
            return True

    async def read(self) -> tuple[str, bool]:
        """The next line (with its newline), ``""`` at the end, or its first 4 KiB and True when too long."""
        scanned = 0
        while True:
            end = self._buffer.find(b"\n", scanned)
            if end >= 0:
                if end + 1 > self.max_bytes + 1:
                    return self._take(end + 1)[:4096], True
                return self._take(end + 1), False
            scanned = len(self._buffer)
            if scanned > self.max_bytes:
                return await self._skip_rest(), True
            if self._eof or not await self._fill():
                return self._take(len(self._buffer)), False

    def _take(self, count: int) -> str:
        line = bytes(self._buffer[:count])
        del self._buffer[:count]
        return line.decode("utf-8", errors="replace")

    async def _skip_rest(self) -> str:
        """Keep the head of an oversized line and drop the rest of it, up to and including its newline."""
        head = self._take(4096)
        self._buffer.clear()
        while not self._eof and await self._fill():
            end = self._buffer.find(b"\n")
            if end >= 0:
                del self._buffer[: end + 1]
                break
            self._buffer.clear()
        return head


class _Output:
    """Writes each message as one line: on the loop for a non-blocking pipe, else in one thread hop."""

    def __init__(self, fd: int, on_loop: bool) -> None:
        self.fd = fd
        self.on_loop = on_loop

    async def write(self, data: bytes) -> None:
        if not self.on_loop:
            await anyio.to_thread.run_sync(_write_all, self.fd, data)
            return
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            view = view[written:]


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
    loop_in = _loop_capable(stdin_fd)
    # Writes stay in a worker thread, one hop per message: a pipe write wakes the client, which may take
    # the CPU from the writer at once; the loop thread must not be the one left waiting for it back.
    loop_out = False
    if loop_in:
        os.set_blocking(stdin_fd, False)
    if loop_out:
        os.set_blocking(stdout_fd, False)
    lines = LoopLines(stdin_fd, max_message_bytes) if loop_in else None
    screen = ScreenedStdin(
        max_message_bytes,
        source=None if lines else os.fdopen(stdin_fd, "r", encoding="utf-8", errors="replace", closefd=False),
        lines=lines,
    )
    output = _Output(stdout_fd, loop_out)

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
                    await output.write(data.encode("utf-8") + b"\n")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            yield read_stream, write_stream
    finally:
        for fd, on_loop in ((stdin_fd, loop_in), (stdout_fd, loop_out)):
            if on_loop:
                with contextlib.suppress(OSError):
                    os.set_blocking(fd, True)
        if restore_stdout:
            with contextlib.suppress(OSError):
                os.dup2(stdout_fd, 1)
