"""The stdout side of ``baton serve``: each message written and flushed on the loop, or in one thread hop.

The SDK's ``stdio_server`` takes a ``stdout`` file (its public parameter, as ``stdin`` is) and awaits
``write`` then ``flush`` for every message; its default file runs each in its own worker thread, two
thread hops per answer. :class:`FlushedStdout` writes and flushes in one hop, and its ``flush`` has
nothing left to do. The write blocks in the worker thread, never on the event loop, so a client that
stops reading stalls only its own answers.

When stdout is a pipe (and asyncio runs the loop), :class:`LoopStdout` writes on the event loop instead,
through asyncio's ``connect_write_pipe``: no thread hop at all, and ``write`` returns once the pipe took
every byte, so a client that stops reading stalls only the task writing its answers, as before. A
socket, a file or a terminal keeps the thread path (a socket can also be stdin: the pipe transport would
take its incoming bytes for a closed reader).

Like the SDK's own claim, the protocol's stdout moves to a private descriptor and fd 1 points at
stderr while serving, so stray output (a library's print, a child process) never reaches the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from io import TextIOWrapper
from typing import Any

import anyio
import sniffio


class FlushedStdout:
    """An async text file for ``stdio_server(stdout=…)`` whose ``write`` also flushes, in one thread hop;
    ``written`` (if given) is called on the event loop after each message is flushed."""

    def __init__(self, target: Any, written: Callable[[], None] | None = None) -> None:
        self._target = target
        self._written = written

    def _write_flushed(self, text: str) -> int:
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
    """An async text file for ``stdio_server(stdout=…)`` writing to a pipe on the event loop; ``written``
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
