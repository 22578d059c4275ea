r"""The garbage collector of ``baton serve``: paused while it starts, its start-up heap frozen, young
collections less often.

A baton server holds about 150,000 tracked objects once it is up (SQLAlchemy's tables, pydantic's models
for every tool, the MCP SDK), twice the SDK's bare server. Every request of the streamable HTTP transport
leaves reference cycles behind (tasks, cancel scopes, futures), and while 32 requests are in flight their
objects outlive the young collections and are promoted, so the oldest generation fills and is collected
every few hundred calls: each of those collections walked the whole start-up heap again (~100 ms of CPU
on a loaded machine), 28 % of baton's CPU per call at 32 clients. :func:`settle` runs once the
server is up: one full collection, then :func:`gc.freeze` moves what survived (the start-up heap, alive
for the process's life) out of every later collection, and the youngest generation is collected after
:data:`YOUNG_THRESHOLD` net allocations instead of 700, so fewer survivors are promoted at all. What it
costs: a start-up object that later becomes part of a garbage cycle is never collected (one freed by its
reference count still is), and up to that many more young objects wait for their collection.

Before any of that, start-up itself: almost all imports (the MCP SDK, pydantic schemas), hundreds of
thousands of long-lived objects and next to no garbage, yet CPython runs ~200 collections over them, one
of them full, before ``initialize`` is answered. ``baton serve`` :func:`pause`\ s the collector from its
first line until its registry is loaded (it starts loading after the first ``tools/list`` is answered, when a
request needs the registry, or at the latest one second after start; an HTTP server resumes before it serves):
the load's imports (SQLAlchemy, every tool module) are the same kind of long-lived heap, about 170
collections and a sixth of the load's CPU, on the path of a spawn written right after the cached listing.
:func:`resume` then freezes everything allocated so far (``gc.freeze``) and turns collections back on.
Reference counting frees memory as usual throughout; only reference cycles made during start-up wait for
the resume.
"""

from __future__ import annotations

import gc

#: Net allocations of tracked objects between two collections of the youngest generation (CPython: 700).
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Collect once, freeze the survivors out of later collections, and collect the young less often."""
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


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
