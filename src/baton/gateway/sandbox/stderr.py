"""A sandboxed server's stderr, capped: the last :data:`STDERR_CAP_BYTES` are kept, the rest is counted.

A server may write without end (a 100 MB flood); neither memory nor the log file may grow with it.
The replay drains the pipe in a thread (:func:`drain_in_thread`); the runtime drains it in a task and
mirrors the tail into ``upstream-stderr.log`` (:class:`StderrLog`). Both report how much was cut.
"""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path
from typing import IO, Any

STDERR_CAP_BYTES = 1 << 20
CHUNK = 1 << 16
#: How much of the kept stderr the headline is looked for in, and how much of it is shown.
HEADLINE_SCAN_BYTES = 64 * 1024
HEADLINE_CHARS = 300
#: A Python exception line (``json.decoder.JSONDecodeError: …``, ``KeyError``) at the start of a line.
_PYTHON_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b")
#: A Node (or any) error line: ``Error: Cannot find module``, ``TypeError [ERR_X]: …``, ``node:x  throw``.
_ERROR_LINE = re.compile(r"(?:^|\s)[A-Za-z_]*(?:Error|Exception)(?: \[[A-Z0-9_]+\])?:|^Traceback ")


def headline(text: str) -> str | None:
    """The line a person reads first in a crashed server's stderr: its error, not the stack under it.

    After a Python ``Traceback`` it is the last exception line (the one that names what was raised);
    otherwise the first line that says ``…Error:`` (Node prints the error above its stack)."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if any(line.startswith("Traceback ") for line in lines):
        raised = [line for line in lines if _PYTHON_EXCEPTION.match(line)]
        if raised:
            return _cut(raised[-1])
    found = next(
        (line for line in lines if _ERROR_LINE.search(line) and not line.startswith("Traceback")), None
    )
    return _cut(found.strip()) if found is not None else None


def _cut(line: str) -> str:
    return line if len(line) <= HEADLINE_CHARS else line[:HEADLINE_CHARS] + "…"


class StderrTail:
    """The last ``cap`` bytes of a stream and the total count."""

    def __init__(self, cap: int = STDERR_CAP_BYTES) -> None:
        self.cap = cap
        self.total = 0
        self._buffer = bytearray()
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        """Add bytes; the buffer is trimmed to ``cap`` whenever it passes twice that."""
        with self._lock:
            self.total += len(chunk)
            self._buffer += chunk
            if len(self._buffer) > 2 * self.cap:
                del self._buffer[: len(self._buffer) - self.cap]

    def tail(self, limit: int | None = None) -> bytes:
        """The kept bytes (at most ``cap``, or ``limit``)."""
        with self._lock:
            keep = min(self.cap, limit) if limit is not None else self.cap
            return bytes(self._buffer[-keep:]) if keep else b""

    @property
    def truncated(self) -> bool:
        """Whether more was written than is kept."""
        return self.total > self.cap

    def summary(self) -> dict[str, Any]:
        """What receipts record: bytes written, bytes kept, whether it was cut."""
        return {
            "stderr_bytes": self.total,
            "stderr_kept_bytes": min(self.total, self.cap),
            "stderr_truncated": self.truncated,
        }


def drain_in_thread(stream: IO[bytes], tail: StderrTail) -> threading.Thread:
    """Read ``stream`` to EOF in a daemon thread, feeding ``tail``."""

    def pump() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(CHUNK) if hasattr(stream, "read1") else stream.read(CHUNK):
                tail.feed(chunk)

    thread = threading.Thread(target=pump, name="baton-stderr", daemon=True)
    thread.start()
    return thread


class StderrLog:
    """``upstream-stderr.log`` kept to the last ``cap`` bytes (at most twice that between trims)."""

    def __init__(self, path: Path, cap: int = STDERR_CAP_BYTES) -> None:
        self.path = path
        self.tail = StderrTail(cap)
        self._handle = path.open("ab")
        self._written = path.stat().st_size

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; past twice the cap, rewrite the file with a note and the kept tail."""
        self.tail.feed(chunk)
        self._handle.write(chunk)
        self._written += len(chunk)
        if self._written > 2 * self.tail.cap:
            self._handle.close()
            cut = self.tail.total - self.tail.cap
            note = f"[baton: {cut} earlier bytes of stderr were cut; the last {self.tail.cap} follow]\n"
            data = note.encode() + self.tail.tail()
            self.path.write_bytes(data)
            self._handle = self.path.open("ab")
            self._written = len(data)
        self._handle.flush()

    def close(self) -> None:
        """Close the file."""
        self._handle.close()
