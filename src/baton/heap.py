"""The garbage collector of a long-running server: its start-up heap frozen, young collections less often.

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
