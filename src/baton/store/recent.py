"""A map that keeps only its most recently set keys: per-process memory that a long-running server fills
with one entry per caller, subagent or tool list must not grow without bound."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class RecentMap(OrderedDict[K, V]):
    """An insertion-ordered map holding at most ``limit`` keys: setting a key makes it the newest, and the
    oldest are dropped past the limit (``move_to_end`` on a read makes a key recent again, as an LRU does)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)
