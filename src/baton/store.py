"""The state store: a SQLAlchemy engine over SQLite (WAL) or another database URL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

from baton.errors import StoreError
from baton.schema import metadata

T = TypeVar("T")


def _configure_sqlite(engine: Engine) -> None:
    """WAL, a busy timeout and explicit transactions so writers queue instead of failing."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        readonly = connection.get_execution_options().get("baton_readonly", False)
        # straight to the driver: the statement needs none of SQLAlchemy's execution machinery
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.execute("BEGIN" if readonly else "BEGIN IMMEDIATE")


class Store:
    """One database: transactions for writers, plain connections for readers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        try:
            if self.is_sqlite:
                self.engine = create_engine(url, poolclass=NullPool if ":memory:" in url else None)
                _configure_sqlite(self.engine)
            else:
                self.engine = create_engine(url, pool_pre_ping=True)
            metadata.create_all(self.engine)
        except Exception as exc:
            raise StoreError(
                "store_unavailable", f"The store at {self.safe_url} could not be opened."
            ) from exc

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden."""
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on any error."""
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only connection (a deferred transaction on SQLite)."""
        with self.engine.connect() as connection:
            yield connection.execution_options(baton_readonly=True)

    def run_write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` inside one write transaction and return its result."""
        with self.write() as connection:
            return fn(connection)

    def run_read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read connection and return its result."""
        with self.read() as connection:
            return fn(connection)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
