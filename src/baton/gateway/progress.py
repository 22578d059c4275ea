"""Progress of long gateway work (resolve, download, verify), reported to whoever listens.

The core calls :func:`phase` and :func:`advance`; the CLI listens on a terminal (a rich progress bar on
stderr) and nothing listens elsewhere, so a pipe, the MCP server and the tests see nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Listener:
    """What the CLI does with a report."""

    on_phase: Callable[[str, int | None], None]
    on_advance: Callable[[int], None]


_listener: ContextVar[Listener | None] = ContextVar("baton_gateway_progress", default=None)


def phase(description: str, total: int | None = None) -> None:
    """A new phase of the work (``total`` items, when known)."""
    listener = _listener.get()
    if listener is not None:
        listener.on_phase(description, total)


def advance(size: int = 0) -> None:
    """One item of the phase done (``size`` bytes of it)."""
    listener = _listener.get()
    if listener is not None:
        listener.on_advance(size)


@contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """Report to ``listener`` while the block runs."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
