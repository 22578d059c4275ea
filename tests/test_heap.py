"""baton.wire.heap.settle, which ``baton serve --http`` runs once it is up: the start-up heap frozen out of later
collections, the youngest generation collected less often, and cycles made afterwards still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from baton.wire import heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_settle_freezes_the_heap_and_later_cycles_are_still_collected(restored_gc: None) -> None:
    kept = [object() for _ in range(10)]  # alive at settle: frozen with the rest of the heap
    heap.settle()
    assert gc.get_freeze_count() > len(kept)
    assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD
    first, second = _Node(), _Node()
    first.other, second.other = second, first  # a cycle made after settle
    watched = weakref.ref(first)
    del first, second
    assert watched() is not None  # only the cycle collector frees it
    gc.collect()
    assert watched() is None
