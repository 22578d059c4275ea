"""The stdin lines of ``baton serve``, read on the event loop when stdin is a pipe or a socket.

The screen in front of the SDK's ``stdio_server`` (:mod:`baton.wire.stdio_guard`, passed through its public
``stdin`` parameter) read each line in a worker thread: one thread wake-up on the critical path of every
call. :class:`LoopLines` takes the pipe into asyncio's own ``connect_read_pipe`` (one reader registered
for the life of the server, bytes handed to a protocol as they arrive) and splits lines itself. A regular
file, a terminal, ``/dev/null``, or an event loop that is not asyncio's keeps the thread path
(:class:`ThreadLines`), as before.

The lines are the ones the SDK's own text layer gives (UTF-8 with ``errors="replace"``, universal
newlines: ``\\r\\n``, ``\\r`` and ``\\n`` each end a line and read as ``\\n``), and a line longer than
the cap (counted in characters, as ``readline`` counts) is read through, dropped and reported by its
first 4,096 characters.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import stat
from typing import Any, Protocol

import anyio
import sniffio

#: The head of an oversized line kept to find its id.
HEAD_CHARS = 4096
#: Complete lines buffered ahead of the reader before the pipe is paused.
HIGH_WATER = 1024 * 1024


class StdinLines(Protocol):
    """Where :class:`~baton.wire.stdio_guard.ScreenedStdin` gets its lines."""

    async def read(self) -> tuple[str, bool]:
        """The next line (``""`` at the end), or (its first 4,096 characters, True) when too long."""
        ...

    def close(self) -> None:
        """Stop reading."""
        ...


class ThreadLines:
    """Lines of a text file read in a worker thread (a terminal, a regular file, ``/dev/null``)."""

    def __init__(self, source: Any, max_chars: int) -> None:
        self._source = source
        self.max_chars = max_chars

    async def read(self) -> tuple[str, bool]:
        """The next line, read in a worker thread."""
        return await anyio.to_thread.run_sync(read_line, self._source, self.max_chars)

    def close(self) -> None:
        """Nothing to release: the source stays open, as the SDK's own stays (a thread may block on it)."""


def read_line(source: Any, limit: int) -> tuple[str, bool]:
    """One line, or (its first 4 KiB, True) when it is longer than ``limit`` (the rest is read and dropped)."""
    line = source.readline(limit + 1)
    if len(line) <= limit or line.endswith("\n"):
        return line, False
    head = line[:HEAD_CHARS]
    while line and not line.endswith("\n"):
        line = source.readline(1024 * 1024)
    return head, True


def _text(raw: bytes) -> str:
    """A line as the SDK's text layer reads it: UTF-8 with replacement, its ending read as ``\\n``."""
    text = raw.decode("utf-8", errors="replace")
    if text.endswith("\r\n"):
        return text[:-2] + "\n"
    if text.endswith("\r"):
        return text[:-1] + "\n"
    return text


class LoopLines(asyncio.Protocol):
    """Lines of a pipe or socket, delivered by the event loop (``loop.connect_read_pipe``)."""

    def __init__(self, fd: int, max_chars: int, keep: Any = None) -> None:
        self.fd = fd
        self._keep = keep  # the file that owns ``fd``: never collected (and closed) while it is read
        self.max_chars = max_chars
        self._buffer = bytearray()
        self._eof = False
        self._skip_lf = False  # a line ended on "\r" at the end of a chunk: a "\n" next belongs to it
        self._discarding = False  # the rest of an oversized line is dropped as it arrives
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._closed = False
        # an unterminated line past max_chars bytes: its characters counted as they arrive
        self._long: Any = None
        self._long_counted = 0
        self._long_chars = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The loop took the pipe."""
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Bytes from the pipe: appended, or dropped while the rest of an oversized line arrives."""
        if self._skip_lf and data:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if self._discarding:
            end = _line_end(data, 0)
            if end < 0:
                return
            self._discarding = False
            stop = end + 1
            if data[end : end + 1] == b"\r":
                if stop == len(data):
                    self._skip_lf = True
                elif data[stop : stop + 1] == b"\n":
                    stop += 1
            data = data[stop:]
        self._buffer += data
        if len(self._buffer) > HIGH_WATER and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        """The writer closed the pipe."""
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The pipe is gone (its end, or a read error: both end the input, as the thread path's would)."""
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        """Wait for the next bytes or the end."""
        if self._transport is None:
            await self._connect()
            return
        if self._paused:
            self._paused = False
            self._transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        # the loop's transport closes the file it is given and makes it non-blocking: it gets its own copy
        pipe = os.fdopen(os.dup(self.fd), "rb", buffering=0)
        try:
            await loop.connect_read_pipe(lambda: self, pipe)
        except BaseException:
            pipe.close()
            raise

    async def read(self) -> tuple[str, bool]:
        """The next line (with its newline), ``""`` at the end, or its first 4,096 characters and True."""
        while True:
            if self._closed:
                return "", False
            line = self._take_line()
            if line is not None:
                return line
            if self._eof:
                if not self._buffer:
                    return "", False
                raw = bytes(self._buffer)
                self._buffer.clear()
                return self._checked(raw, raw.decode("utf-8", errors="replace"))
            if self._too_long():
                head = _text(bytes(self._buffer[: self._head * 4]))[: self._head]
                self._buffer.clear()
                self._long = None
                self._discarding = True
                return head, True
            await self._more()

    def _take_line(self) -> tuple[str, bool] | None:
        buffer = self._buffer
        end = _line_end(buffer, 0)
        if end < 0:
            return None
        stop = end + 1
        if buffer[end] == 0x0D:  # "\r": with a "\n" right after, one ending
            if stop == len(buffer) and not self._eof:
                self._skip_lf = True
            elif buffer[stop : stop + 1] == b"\n":
                stop += 1
        raw = bytes(buffer[:stop])
        del buffer[:stop]
        self._long = None
        return self._checked(raw, _text(raw))

    def _checked(self, raw: bytes, text: str) -> tuple[str, bool]:
        """``text`` as read, or its head and True when it holds more than ``max_chars`` characters."""
        if len(raw) <= self.max_chars:
            return text, False
        body = len(text) - 1 if text.endswith("\n") else len(text)
        if body <= self.max_chars:
            return text, False
        return text[: self._head], True

    @property
    def _head(self) -> int:
        """How much of an oversized line is kept: what ``readline(max_chars + 1)`` gave, at most 4,096."""
        return min(HEAD_CHARS, self.max_chars + 1)

    def _too_long(self) -> bool:
        """Whether the unterminated line buffered so far already holds more than ``max_chars`` characters."""
        if len(self._buffer) <= self.max_chars:
            return False
        if self._long is None:
            self._long = codecs.getincrementaldecoder("utf-8")(errors="replace")
            self._long_counted = 0
            self._long_chars = 0
        fresh = bytes(self._buffer[self._long_counted :])
        self._long_chars += len(self._long.decode(fresh))
        self._long_counted = len(self._buffer)
        return self._long_chars > self.max_chars

    def close(self) -> None:
        """Stop reading; the pipe goes back to blocking mode for whoever shares it."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, True)
        self._wake()


def _line_end(data: bytes | bytearray, start: int) -> int:
    """The index of the first ``\\n`` or ``\\r`` at or after ``start``, or -1."""
    newline = data.find(b"\n", start)
    limit = len(data) if newline < 0 else newline
    carriage = data.find(b"\r", start, limit)
    return carriage if carriage >= 0 else newline


def loop_capable(fd: int) -> bool:
    """Whether the asyncio loop can take ``fd``: a pipe, or a socket that is not also stdout (the loop makes
    the socket non-blocking, and stdout's thread write on it would fail), with asyncio running the loop."""
    try:
        if sniffio.current_async_library() != "asyncio":
            return False
        status = os.fstat(fd)
    except (OSError, sniffio.AsyncLibraryNotFoundError):
        return False
    if stat.S_ISFIFO(status.st_mode):
        return True
    if not stat.S_ISSOCK(status.st_mode):
        return False
    try:
        out = os.fstat(1)
    except OSError:
        return True
    return (out.st_dev, out.st_ino) != (status.st_dev, status.st_ino)
