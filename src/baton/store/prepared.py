"""Statements built once and compiled once, for the hot paths (a subagent's turn, the budget ledger).

Building a statement per call (``update(t).where(...).values(...)``) and SQLAlchemy's execution machinery
cost more than SQLite's own work, as the receipt append found. A :class:`Prepared` statement is built at
import; on SQLite it is compiled once and run straight on the driver's cursor, with the column types' own
bind and result processing (a JSON column is written and read exactly as SQLAlchemy does), and elsewhere
it runs through SQLAlchemy (which caches its compiled form).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Insert, Select, Update

from baton.store.engine import DriverTransaction

Processor = Callable[[Any], Any] | None
Statement = Insert | Update | Select[Any]


@dataclass(frozen=True)
class _Bind:
    """One positional parameter: its name, the value built into the statement, and its type's processor."""

    name: str
    value: Any
    required: bool
    process: Processor


@dataclass(frozen=True)
class _Compiled:
    """A statement's SQLite text, its parameters in order, and how its rows are made."""

    sql: str
    binds: tuple[_Bind, ...]
    row: Any
    results: tuple[Processor, ...]
    #: Whether any result column needs its type's processing.
    processed: bool


def _compile(statement: Statement, dialect: Any) -> _Compiled:
    compiled: Any = statement.compile(dialect=dialect)
    binds = []
    for name in compiled.positiontup or ():
        bind = compiled.binds[name]
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append(_Bind(name, bind.value, bool(bind.required), process))
    columns = list(getattr(statement, "selected_columns", ()))
    row = namedtuple("Row", [c.key for c in columns], rename=True) if columns else None
    results = tuple(c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns)
    return _Compiled(compiled.string, tuple(binds), row, results, any(results))


class Prepared:
    """One statement built once; run on SQLite's driver with the SQL compiled once, elsewhere by SQLAlchemy.

    Rows read on SQLite are named tuples (attribute and index access, like SQLAlchemy's rows). A
    connection is a SQLAlchemy :class:`~sqlalchemy.Connection` inside a transaction, or a
    :class:`~baton.store.engine.DriverTransaction`.
    """

    def __init__(self, statement: Statement) -> None:
        self.statement = statement
        self._sqlite: _Compiled | None = None

    def _driver(self, connection: Connection | DriverTransaction) -> tuple[Any, Any] | None:
        """(driver connection, dialect) when the statement runs on SQLite's driver; None otherwise."""
        if isinstance(connection, DriverTransaction):
            return connection.driver, connection.dialect
        if connection.dialect.name != "sqlite":
            return None
        return connection.connection.driver_connection, connection.dialect

    def _run(self, connection: Connection | DriverTransaction, params: dict[str, Any]) -> tuple[Any, Any]:
        """(sqlite3 cursor, compiled) on SQLite, (SQLAlchemy result, None) elsewhere."""
        on_driver = self._driver(connection)
        if on_driver is None:
            assert isinstance(connection, Connection)
            return connection.execute(self.statement, params), None
        driver, dialect = on_driver
        compiled = self._sqlite
        if compiled is None:
            compiled = self._sqlite = _compile(self.statement, dialect)
        values = []
        for bind in compiled.binds:
            value = params[bind.name] if bind.required or bind.name in params else bind.value
            values.append(value if bind.process is None else bind.process(value))
        return driver.execute(compiled.sql, values), compiled

    def rowcount(self, connection: Connection | DriverTransaction, **params: Any) -> int:
        """Run a write; how many rows it changed."""
        cursor, _compiled = self._run(connection, params)
        return int(cursor.rowcount)

    def first(self, connection: Connection | DriverTransaction, **params: Any) -> Any | None:
        """The first row, or None."""
        cursor, compiled = self._run(connection, params)
        if compiled is None:
            return cursor.first()
        raw = cursor.fetchone()
        cursor.close()
        return None if raw is None else _row(compiled, raw)

    def all(self, connection: Connection | DriverTransaction, **params: Any) -> list[Any]:
        """Every row."""
        cursor, compiled = self._run(connection, params)
        if compiled is None:
            return list(cursor.all())
        return [_row(compiled, raw) for raw in cursor.fetchall()]

    def scalar(self, connection: Connection | DriverTransaction, **params: Any) -> Any:
        """The first column of the first row, or None."""
        row = self.first(connection, **params)
        return None if row is None else row[0]


def _row(compiled: _Compiled, raw: tuple[Any, ...]) -> Any:
    """A driver row as a named tuple, each value through its column type's result processor."""
    if compiled.processed:
        raw = tuple(v if p is None else p(v) for p, v in zip(compiled.results, raw, strict=True))
    return compiled.row._make(raw)
