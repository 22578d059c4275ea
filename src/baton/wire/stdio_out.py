"""The stdout side of ``baton serve``: each message written by its sender, on the loop or in one thread hop.

:class:`StdoutMessages` is the write stream ``Server.run`` takes (the SDK's ``WriteStream`` protocol):
each message is serialized and written by the task that sends it, with no writer task and no memory
stream between (the SDK's ``stdio_server`` puts both there). A client gone (a broken pipe) is
``anyio.BrokenResourceError`` to the sender, as the SDK's own streams report it, and ends the serving
through ``on_gone``.

When stdout is a pipe (and asyncio runs the loop), :class:`LoopStdout` writes on the event loop, through
asyncio's ``connect_write_pipe``: no thread hop at all, and ``write`` returns once the pipe took every
byte, so a client that stops reading stalls only the tasks writing to it. A socket, a file or a terminal
takes :class:`FlushedStdout`: write and flush in one worker-thread hop (a socket can also be stdin: the
pipe transport would take its incoming bytes for a closed reader). Either takes a whole line at a time.

Like the SDK's own claim, the protocol's stdout moves to a private descriptor and fd 1 points at
stderr while serving, so stray output (a library's print, a child process) never reaches the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from io import TextIOWrapper
from typing import Any

import anyio
import sniffio
from mcp.shared.message import SessionMessage


class FlushedStdout:
    """An async text file for :class:`StdoutMessages` whose ``write`` also flushes, in one thread hop;
    ``written`` (if given) is called on the event loop after each message is flushed."""

    def __init__(self, target: Any, written: Callable[[], None] | None = None) -> None:
        self._target = target
        self._written = written
        self._lock = threading.Lock()  # two tasks' messages never interleave on the wire

    def _write_flushed(self, text: str) -> int:
        with self._lock:
            written: int = self._target.write(text)
            self._target.flush()
        return written

    async def write(self, text: str) -> int:
        """Write ``text`` and flush it to the client."""
        count = await anyio.to_thread.run_sync(self._write_flushed, text)
        if self._written is not None:
            self._written()
        return count

    async def flush(self) -> None:
        """Nothing to do: every write was flushed."""


class LoopStdout(asyncio.Protocol):
    """An async text file for :class:`StdoutMessages` writing to a pipe on the event loop; ``written``
    (if given) is called after each message is taken by the pipe."""

    def __init__(self, fd: int, written: Callable[[], None] | None = None) -> None:
        self.fd = fd
        self._written = written
        self._transport: asyncio.WriteTransport | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._lost: BaseException | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The loop took the pipe; every byte it cannot write at once pauses the writer."""
        assert isinstance(transport, asyncio.WriteTransport)
        transport.set_write_buffer_limits(high=0)
        self._transport = transport

    def pause_writing(self) -> None:
        """The pipe is full: ``write`` waits until it took everything."""
        self._drained.clear()

    def resume_writing(self) -> None:
        """The pipe took everything."""
        self._drained.set()

    def connection_lost(self, exc: Exception | None) -> None:
        """The client closed its end (or the pipe failed)."""
        self._lost = exc if exc is not None else BrokenPipeError("stdout is closed")
        self._drained.set()

    async def _connect(self) -> asyncio.WriteTransport:
        # the transport closes the file it is given and makes it non-blocking: it gets its own copy
        pipe = os.fdopen(os.dup(self.fd), "wb", buffering=0)
        try:
            await asyncio.get_running_loop().connect_write_pipe(lambda: self, pipe)
        except BaseException:
            pipe.close()
            raise
        assert self._transport is not None
        return self._transport

    async def write(self, text: str) -> int:
        """Write ``text``; returns once the pipe took all of it (``BrokenPipeError`` once the client is gone)."""
        transport = self._transport or await self._connect()
        if transport.is_closing():
            raise self._gone()
        transport.write(text.encode("utf-8"))
        if not self._drained.is_set():
            await self._drained.wait()
        if transport.is_closing():  # the write failed (the transport closes itself on a write error)
            raise self._gone()
        if self._written is not None:
            self._written()
        return len(text)

    def _gone(self) -> BaseException:
        return self._lost if self._lost is not None else BrokenPipeError("stdout is closed")

    async def flush(self) -> None:
        """Nothing to do: every write was taken by the pipe."""

    def close(self) -> None:
        """Close the loop's copy of the pipe; the private descriptor goes back to blocking mode."""
        if self._transport is not None:
            self._transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, True)


class StdoutMessages:
    """The server's write stream: each message written as one JSON line on ``stdout`` by its sender.

    ``stdout`` is :class:`LoopStdout` or :class:`FlushedStdout`; either takes a whole line at a time, so
    messages sent by concurrent tasks never interleave. ``on_gone`` is called once, at the first write
    the client is no longer there to read.
    """

    def __init__(self, stdout: FlushedStdout | LoopStdout, on_gone: Callable[[], None]) -> None:
        self._stdout = stdout
        self._on_gone = on_gone
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write ``item`` as one line; returns once stdout took it."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        try:
            await self._stdout.write(text)
        except (OSError, ValueError) as exc:  # a broken pipe; a file already closed
            self._broken = True
            self._on_gone()
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """Refuse further messages (stdout itself is released by :func:`claimed_stdout`)."""
        self._closed = True

    async def __aenter__(self) -> StdoutMessages:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _pipe_on_asyncio(fd: int) -> bool:
    """Whether ``fd`` is a pipe of its own (not also stderr's, as ``2>&1`` makes it: the loop makes the pipe
    non-blocking, and the logs' blocking writes to it would fail) and asyncio runs the current loop."""
    try:
        if sniffio.current_async_library() != "asyncio":
            return False
        status = os.fstat(fd)
        if not stat.S_ISFIFO(status.st_mode):
            return False
        err = os.fstat(2)
    except (OSError, sniffio.AsyncLibraryNotFoundError):
        return False
    return (err.st_dev, err.st_ino) != (status.st_dev, status.st_ino)


@contextlib.contextmanager
def claimed_stdout(written: Callable[[], None] | None = None) -> Iterator[FlushedStdout | LoopStdout]:
    """The protocol's stdout on a private descriptor (above 2, close-on-exec), fd 1 pointed at stderr
    until the server stops; where a descriptor cannot be duplicated or diverted, Python's stdout in place.
    ``written`` is called after each message is flushed (or taken by the pipe, :class:`LoopStdout`)."""
    sys.stdout.flush()
    try:
        import fcntl

        private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError):
        yield FlushedStdout(sys.stdout, written)
        return
    try:
        os.dup2(2, 1)
    except OSError:
        with contextlib.suppress(OSError):
            os.dup2(private, 1)  # fd 1 carries the wire again: one writer on it, never two
        yield FlushedStdout(sys.stdout, written)
        return
    if _pipe_on_asyncio(private):
        on_loop = LoopStdout(private, written)
        try:
            yield on_loop
        finally:
            on_loop.close()
            with contextlib.suppress(OSError):
                os.dup2(private, 1)
        return
    # never closed: a worker thread may still be writing on it when the server stops (as in the SDK)
    target = TextIOWrapper(os.fdopen(private, "wb", closefd=False), encoding="utf-8")
    try:
        yield FlushedStdout(target, written)
    finally:
        with contextlib.suppress(OSError, ValueError):
            target.flush()
        with contextlib.suppress(OSError):
            os.dup2(private, 1)
