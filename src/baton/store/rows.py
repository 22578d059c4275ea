"""Listing stored rows one at a time: a row whose values do not have the shape its table promises (written
behind baton's back, or damaged) is skipped and reported as ``{<id>, reason}``, and the rest is listed.

A list reads JSON columns as raw text (:func:`raw_json`) and parses them per row, because SQLAlchemy would
otherwise parse every row while fetching, and one bad value would fail the whole list. Each entry is then
checked against a strict pydantic shape; the reason names the fields, never their values.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import Column, Text, type_coerce
from sqlalchemy.sql.elements import Label

log = logging.getLogger("baton.store.rows")

RowT = TypeVar("RowT")


class RowShape(BaseModel):
    """A listed entry's shape: strict types (no coercion), unknown keys ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class RowProblemError(ValueError):
    """A stored value that cannot be listed (the message names the field, not the value)."""


@dataclass
class Screened:
    """The entries that could be listed, and the rows that were skipped with why."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)


@dataclass
class ListPage:
    """One page of a keyset-paginated list: the entries, the rows skipped, and where the next page starts
    (``(created_at, id)`` of the last row read, listed or skipped), or None at the end."""

    rows: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    next_after: tuple[str, str] | None


def page_of(
    raw: Sequence[Any],
    limit: int,
    screened: Callable[[Sequence[Any]], Screened],
    key: Callable[[Any], tuple[Any, Any]],
) -> ListPage:
    """Screen the first ``limit`` of ``raw`` (fetched with ``limit + 1``); the next page starts after the
    last row *read*, so a skipped row never ends or repeats the list."""
    result = screened(raw[:limit])
    more = len(raw) > limit
    after = tuple(str(part) for part in key(raw[limit - 1])) if more else None
    return ListPage(result.rows, result.skipped, (after[0], after[1]) if after else None)


def raw_json(column: Column[Any]) -> Label[Any]:
    """``column`` read without SQLAlchemy's JSON parsing (parse it per row with :func:`load_json`)."""
    return type_coerce(column, Text).label(column.name)


def load_json(value: Any, name: str) -> Any:
    """A JSON column's value: parsed when it arrives as text (SQLite), as is when the driver parsed it."""
    if not isinstance(value, str | bytes):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise RowProblemError(f"{name} is not valid JSON") from None


def finite(value: Any, name: str) -> float:
    """A stored number that must be a real, finite one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RowProblemError(f"{name} is not a number")
    return float(value)


def screen(
    rows: Iterable[RowT],
    build: Callable[[RowT], dict[str, Any]],
    shape: type[RowShape],
    *,
    id_key: str,
    raw_id: Callable[[RowT], Any],
) -> Screened:
    """Build and check each row's entry; a row that fails is skipped (logged once) with its reason."""
    screened = Screened()
    for row in rows:
        try:
            entry = build(row)
            shape.model_validate(entry)
        except RowProblemError as exc:
            reason = str(exc)
        except ValidationError as exc:
            reason = "; ".join(
                f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False, include_context=False)
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            reason = "the row cannot be read"
        else:
            screened.rows.append(entry)
            continue
        ident = str(raw_id(row))
        log.warning("skipped a stored row that cannot be listed: %s %s (%s)", id_key, ident, reason)
        screened.skipped.append({id_key: ident, "reason": reason})
    return screened
