"""Tables through the privacy filter: a header cell that names private data hides the cells under it.

Spreadsheet and database servers answer with tables, not objects keyed by name: an array of rows whose
first row is the header (a spreadsheet range), ``{"columns": [...], "rows": [[...]]}`` (DuckDB,
MotherDuck), cells addressed ``A1`` or as ``{row, column, value}``, ``[{"name": ..., "value": ...}]``
pairs, and CSV, TSV, markdown or aligned text. Each function here finds the header cells that name
private data (the predicate the filter gives it) and puts :data:`FILTERED` in every cell of their
columns below them, returning what it removed, so the filter can remove those values wherever else they
appear. A key naming private data in an object (``{"private_notes": ...}``) stays the filter's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: What stands where a removed value was.
FILTERED = "[filtered]"

#: Keys whose value, in an object, is a table's header (normalized: lowercase, no separators).
HEADER_KEYS = frozenset(
    {"columns", "columnnames", "headers", "header", "fields", "fieldnames", "cols", "labels", "titles"}
)

#: Keys that name the column (or entry) an object describes: ``{"name": "password", "value": ...}``.
NAME_KEYS = frozenset({"name", "key", "field", "column", "columnname", "header", "label", "title"})

#: Keys of such an object that describe it rather than hold its value.
DESCRIBING_KEYS = frozenset({"type", "dtype", "datatype", "columntype", "nullable", "index", "position"})

#: Siblings of a header that describe its columns (``columnTypes``), not rows of values.
DESCRIBING = re.compile(r"(?i)type|format|width|align|nullable|kind|schema|header|column|label|title")

#: A header cell longer than this is text, not a column's name.
MAX_HEADER_CHARS = 64

CELL_ADDRESS = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d{1,7})$")

Private = Callable[[str], bool]


@dataclass
class Removed:
    """What a table's filtering took out: the values, and where (one entry per private column)."""

    values: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)

    def take(self, value: Any) -> str:
        """Remember ``value`` as removed; what stands in its place."""
        if value is not None and value != "":
            self.values.append(value if isinstance(value, str) else str(value))
        return FILTERED


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def names_private(cell: Any, private: Private) -> bool:
    """Whether a cell reads as a column's name that names private data."""
    return isinstance(cell, str) and 0 < len(cell.strip()) <= MAX_HEADER_CHARS and private(cell.strip())


def row_label(cells: list[Any], private: Private, position: int) -> set[int]:
    """A row whose first cell names private data (a field and its value, ``["password", "hunter2"]``):
    the rest of it. The first row of a table is such a label only with two cells (else a header)."""
    if len(cells) >= 2 and names_private(cells[0], private) and (position > 0 or len(cells) == 2):
        return set(range(1, len(cells)))
    return set()


def filter_rows(rows: list[Any], private: Private, removed: Removed, path: str) -> list[Any]:
    """An array of rows (arrays): below a row holding a private header cell, that column's cells; right
    of a first cell naming private data, the rest of its row."""
    columns: dict[int, str] = {}
    out: list[Any] = []
    for position, row in enumerate(rows):
        if not isinstance(row, list):
            out.append(row)
            continue
        labelled = row_label(row, private, position)
        hide = set(columns) | labelled
        if hide:
            row = [removed.take(c) if i in hide and c != FILTERED else c for i, c in enumerate(row)]
        # any row may be a header (a sheet often has a title row first): a cell naming private data
        # hides its column from the next row on (but a field's name, in a table of fields, is no header)
        for index, cell in enumerate(row):
            if index == 0 and labelled and position > 0:
                continue
            if index not in columns and names_private(cell, private):
                columns[index] = str(cell).strip()
                removed.fields.append(f"{path}[*].{columns[index]}")
        out.append(row)
    return out


def header_names(value: Any) -> list[str | None] | None:
    """The column names of a header value: strings, or objects naming their column; None if not one."""
    if not isinstance(value, list) or not value:
        return None
    names: list[str | None] = []
    for item in value:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            named = [v for k, v in item.items() if _norm(str(k)) in NAME_KEYS and isinstance(v, str)]
            names.append(named[0] if named else None)
        else:
            return None
    return names


def filter_columnar(obj: dict[str, Any], private: Private, removed: Removed, path: str) -> dict[str, Any]:
    """``{"columns": [...], "rows": [[...]]}`` and its kin: the private columns of every sibling row."""
    for key, value in obj.items():
        if _norm(str(key)) not in HEADER_KEYS:
            continue
        names = header_names(value)
        if names is None:
            continue
        hidden = {i for i, name in enumerate(names) if name is not None and names_private(name, private)}
        if not hidden:
            continue
        removed.fields.extend(f"{path}.{names[i]}" if path else str(names[i]) for i in sorted(hidden))
        obj = {
            k: v if k == key or DESCRIBING.search(str(k)) else _hide_in_rows(v, hidden, len(names), removed)
            for k, v in obj.items()
        }
    return obj


def _hide_in_rows(value: Any, hidden: set[int], width: int, removed: Removed) -> Any:
    """A sibling of a header: rows (arrays of cells) or one row as wide as the header."""
    if not isinstance(value, list):
        return value
    if value and all(isinstance(row, list) for row in value):
        return [_hide_cells(row, hidden, removed) for row in value]
    if len(value) == width and not any(isinstance(c, dict | list) for c in value):
        return _hide_cells(value, hidden, removed)
    return value


def _hide_cells(row: list[Any], hidden: set[int], removed: Removed) -> list[Any]:
    return [removed.take(c) if i in hidden else c for i, c in enumerate(row)]


def filter_named_entry(obj: dict[str, Any], private: Private, removed: Removed, path: str) -> dict[str, Any]:
    """``{"name": "password", "value": ...}``: an object naming a private column or entry keeps only its
    name and how it is described."""
    names = [v for k, v in obj.items() if _norm(str(k)) in NAME_KEYS and names_private(v, private)]
    if not names:
        return obj
    kept = (
        NAME_KEYS | DESCRIBING_KEYS | {"row", "col", "r", "c", "address", "cell", "rowindex", "columnindex"}
    )
    removed.fields.append(f"{path}.{names[0]}" if path else str(names[0]))
    return {k: v if _norm(str(k)) in kept else _take_all(v, removed) for k, v in obj.items()}


def _take_all(value: Any, removed: Removed) -> Any:
    if isinstance(value, dict):
        return {k: _take_all(v, removed) for k, v in value.items()}
    if isinstance(value, list):
        return [_take_all(v, removed) for v in value]
    return removed.take(value) if value is not None else None


def column_number(letters: str) -> int:
    """A spreadsheet column's number (A=1)."""
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - 64
    return number


def filter_addressed(obj: dict[str, Any], private: Private, removed: Removed, path: str) -> dict[str, Any]:
    """``{"A1": "private_notes", "A2": ...}``: the cells below a private header cell, same column."""
    places: dict[str, tuple[int, int]] = {}
    for key in obj:
        match = CELL_ADDRESS.match(str(key))
        if match is None:
            return obj
        places[key] = (column_number(match.group(1)), int(match.group(2)))
    return _hide_below(obj, places, private, removed, path)


def _hide_below(
    obj: dict[str, Any], places: dict[str, tuple[int, int]], private: Private, removed: Removed, path: str
) -> dict[str, Any]:
    """Hide each keyed cell lying below a private header cell of its column."""
    headers: dict[int, int] = {}
    for key, (column, row) in places.items():
        if names_private(obj[key], private) and row < headers.get(column, row + 1):
            headers[column] = row
            removed.fields.append(f"{path}.{str(obj[key]).strip()}" if path else str(obj[key]).strip())
    if not headers:
        return obj
    return {
        k: removed.take(v) if k in places and places[k][1] > headers.get(places[k][0], places[k][1]) else v
        for k, v in obj.items()
    }


ROW_KEYS = frozenset({"row", "r", "rowindex", "rownumber"})
COLUMN_KEYS = frozenset({"column", "col", "c", "columnindex", "columnnumber"})
ADDRESS_KEYS = frozenset({"address", "cell", "coordinate", "ref"})
VALUE_KEYS = frozenset({"value", "v", "text", "formatted", "formattedvalue", "display", "formula"})


def _cell_place(cell: dict[str, Any]) -> tuple[int, int] | None:
    """Where a ``{row, column, value}`` or ``{address, value}`` cell is: (column, row)."""
    keys = {_norm(str(k)): v for k, v in cell.items()}
    for name in ADDRESS_KEYS:
        match = CELL_ADDRESS.match(str(keys.get(name, "")))
        if match is not None:
            return column_number(match.group(1)), int(match.group(2))
    row = next((keys[k] for k in ROW_KEYS if k in keys), None)
    column = next((keys[k] for k in COLUMN_KEYS if k in keys), None)
    if isinstance(column, str) and column.isalpha():
        column = column_number(column)
    if isinstance(row, int) and isinstance(column, int):
        return column, row
    return None


def filter_cells(cells: list[Any], private: Private, removed: Removed, path: str) -> list[Any]:
    """A list of cell objects (``{"address": "C2", "value": ...}``): the values below a private header."""
    places = [(_cell_place(c) if isinstance(c, dict) else None) for c in cells]
    if not any(places):
        return cells
    headers: dict[int, int] = {}
    for cell, place in zip(cells, places, strict=True):
        value = _cell_value(cell) if place else None
        if place and names_private(value, private) and place[1] < headers.get(place[0], place[1] + 1):
            headers[place[0]] = place[1]
            removed.fields.append(f"{path}[*].{str(value).strip()}")
    out = []
    for cell, place in zip(cells, places, strict=True):
        if place and place[1] > headers.get(place[0], place[1]):
            cell = {k: removed.take(v) if _norm(str(k)) in VALUE_KEYS else v for k, v in cell.items()}
        out.append(cell)
    return out


def _cell_value(cell: dict[str, Any]) -> Any:
    return next((v for k, v in cell.items() if _norm(str(k)) in VALUE_KEYS), None)
