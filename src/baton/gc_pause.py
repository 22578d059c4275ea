"""The cyclic garbage collector paused while ``baton serve`` starts, then resumed with start-up frozen.

Start-up is almost all imports (the MCP SDK, pydantic schemas): hundreds of thousands of long-lived
objects and next to no garbage, yet CPython runs ~200 collections over them, one of them a full one, before
``initialize`` is answered. ``baton serve`` pauses the collector from its first line until its registry
starts loading (after the first ``tools/list`` is answered, when a request needs the registry, or at the
latest one second after start; an HTTP server before it serves). :func:`resume` then moves everything
allocated so far to the permanent generation (``gc.freeze``), so later full collections of the running
server no longer walk the start-up objects either. Reference counting frees memory as usual throughout;
only reference cycles made during start-up wait for the resume.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop automatic collections until :func:`resume` (a no-op when the collector is already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what start-up allocated and turn automatic collections back on, once; only undoes :func:`pause`."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
