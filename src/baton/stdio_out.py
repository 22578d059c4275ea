"""The stdout side of ``baton serve``: each message written and flushed in one worker-thread hop.

The SDK's ``stdio_server`` takes a ``stdout`` file (its public parameter, as ``stdin`` is) and awaits
``write`` then ``flush`` for every message; its default file runs each in its own worker thread, two
thread hops per answer. :class:`FlushedStdout` writes and flushes in one hop, and its ``flush`` has
nothing left to do. The write blocks in the worker thread, never on the event loop, so a client that
stops reading stalls only its own answers.

Like the SDK's own claim, the protocol's stdout moves to a private descriptor and fd 1 points at
stderr while serving, so stray output (a library's print, a child process) never reaches the wire.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from io import TextIOWrapper
from typing import Any

import anyio


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


@contextlib.contextmanager
def claimed_stdout(written: Callable[[], None] | None = None) -> Iterator[FlushedStdout]:
    """The protocol's stdout on a private descriptor (above 2, close-on-exec), fd 1 pointed at stderr
    until the server stops; where a descriptor cannot be duplicated or diverted, Python's stdout in place.
    ``written`` is called after each message is flushed (see :class:`FlushedStdout`)."""
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
    # never closed: a worker thread may still be writing on it when the server stops (as in the SDK)
    target = TextIOWrapper(os.fdopen(private, "wb", closefd=False), encoding="utf-8")
    try:
        yield FlushedStdout(target, written)
    finally:
        with contextlib.suppress(OSError, ValueError):
            target.flush()
        with contextlib.suppress(OSError):
            os.dup2(private, 1)
