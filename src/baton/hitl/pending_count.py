"""How many requests are pending, counted up to a cap.

A list page and the live title show how many requests wait. Counting every pending row walks the whole
index (at 100,000 pending, 43 % of a page's time in ``baton serve``), and past a thousand the exact
figure tells a person nothing a "1000+" does not. So the count stops at ``COUNT_CAP + 1`` rows, and a
reading says whether it is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, func, literal_column, select

#: Counted exactly up to here; past it a count reads as "more than ``COUNT_CAP``".
COUNT_CAP = 1000


@dataclass(frozen=True)
class PendingCount:
    """A count read from ``capped_count``: ``total`` (at most ``COUNT_CAP``) and whether it is exact."""

    total: int
    exact: bool

    @classmethod
    def read(cls, counted: int) -> PendingCount:
        """The reading of a capped count's value (``COUNT_CAP + 1`` means more than ``COUNT_CAP``)."""
        return cls(min(counted, COUNT_CAP), counted <= COUNT_CAP)

    @property
    def label(self) -> str:
        """How a page shows it: ``42``, or ``1000+`` past the cap."""
        return str(self.total) if self.exact else f"{self.total}+"


def capped_count(where: ColumnElement[bool]) -> ScalarSelect[Any]:
    """The rows matching ``where``, counted up to ``COUNT_CAP + 1``: the index walk stops there."""
    counted = select(literal_column("1")).where(where).limit(COUNT_CAP + 1).subquery()
    return select(func.count()).select_from(counted).scalar_subquery()
