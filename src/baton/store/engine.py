"""The state store: a SQLAlchemy engine over SQLite (WAL) or another database URL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

from baton.errors import ConfigError, StoreError
from baton.store.migrate import ensure_current

T = TypeVar("T")


def _configure_sqlite(engine: Engine) -> None:
    """WAL, a busy timeout and explicit transactions so writers queue instead of failing."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=10000")  # first: the journal-mode switch waits on it too
        if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        readonly = connection.get_execution_options().get("baton_readonly", False)
        # straight to the driver: the statement needs none of SQLAlchemy's execution machinery
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.execute("BEGIN" if readonly else "BEGIN IMMEDIATE")


def normalize_url(url: str) -> str:
    """The URL baton's (synchronous) engine uses: ``postgresql+asyncpg``/``postgresql`` run on psycopg 3."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _ensure_receipt_head(engine: Engine) -> None:
    """Create the chain's tip row (seq 0, the genesis hash) so every append is an UPDATE of one locked row."""
    from sqlalchemy import insert, select
    from sqlalchemy.exc import IntegrityError

    from baton.store.schema import receipt_head

    with engine.begin() as connection:
        if connection.execute(select(receipt_head.c.id).where(receipt_head.c.id == 1)).first():
            return
    try:
        with engine.begin() as connection:
            connection.execute(insert(receipt_head).values(id=1, seq=0, sha256="0" * 64))
    except IntegrityError:
        return  # another process created it first


def _private_sqlite_file(url: str) -> None:
    """A file database (and its -wal/-shm, which SQLite creates with the file's mode) is made 0600."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    from baton.store.private import private_sqlite

    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        private_sqlite(Path(database))


#: How long opening a store keeps trying while another process holds the database's lock (its own
#: migration, the first switch of a new file to WAL, a checkpoint), before ``store_unavailable``.
OPEN_WAIT_SECONDS = 60.0


def _while_locked(step: Callable[[], object]) -> None:
    """Run ``step``, again while SQLite answers that the database is locked, until :data:`OPEN_WAIT_SECONDS`
    have passed (SQLite may answer so at once, without waiting out its busy timeout, where waiting could
    deadlock); any other error, or the lock past the deadline, is raised."""
    import time

    from sqlalchemy.exc import OperationalError

    deadline = time.monotonic() + OPEN_WAIT_SECONDS
    while True:
        try:
            step()
            return
        except OperationalError as exc:
            if "database is locked" not in str(exc.orig) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def create_store_engine(url: str) -> Engine:
    """An engine for ``url``: SQLite in WAL with queued writers, other databases with a checked pool."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = normalize_url(url)
        if url.startswith("sqlite"):
            _private_sqlite_file(url)
            engine = create_engine(url, poolclass=NullPool if ":memory:" in url else None)
            _configure_sqlite(engine)
            return engine
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        # the URL may hold a password: name the variable and the kind of problem, never the value
        problem = "its driver is not installed" if not isinstance(exc, ArgumentError) else "it is not a URL"
        raise ConfigError(
            "config_invalid",
            f"BATON_DATABASE_URL cannot be opened: {problem} (e.g. sqlite:///PATH or "
            "postgresql://USER@HOST/DB with the postgres extra installed).",
            variable="BATON_DATABASE_URL",
        ) from None


@dataclass(frozen=True)
class DriverTransaction:
    """A SQLite transaction held straight on the driver's connection (:meth:`Store.write_driver`,
    :meth:`Store.read_prepared`), or the kept autocommit reader (:meth:`Store.quick_reader`)."""

    dialect: Any
    driver: Any
    #: Steps run in order just before the transaction commits, by name (None: the autocommit reader). A
    #: writer that moves the same row several times in one transaction (the receipt chain's head) writes
    #: it once, here, and keeps its value in :attr:`held` meanwhile.
    before_commit: dict[str, Callable[[], None]] | None = None
    held: dict[str, Any] = field(default_factory=dict)


class Store:
    """One database: transactions for writers, plain connections for readers."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        url = self.url
        self.is_sqlite = url.startswith("sqlite")
        self.engine = create_store_engine(url)  # config_invalid for a URL that is no database URL
        #: The pooled connection :meth:`write_driver` keeps checked out, and the lock that takes turns on it.
        self._hot: Any = None
        self._hot_lock = threading.Lock()
        self._hot_owner: int | None = None
        #: The pooled connection :meth:`quick_reader` keeps checked out, and its lock.
        self._reader: Any = None
        self._reader_lock = threading.Lock()

        def prepare() -> None:
            ensure_current(self.engine)
            _ensure_receipt_head(self.engine)

        try:
            _while_locked(prepare)
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
    def write_driver(self) -> Iterator[DriverTransaction]:
        """SQLite only: ``BEGIN IMMEDIATE`` … ``COMMIT`` on a driver connection, for a hot write whose
        statements already run on the driver (the receipt append): SQLAlchemy's begin/commit machinery and
        a pool checkout per call cost more than SQLite's own work. One pooled connection is kept checked
        out for it and taken in turns under a lock (other processes still queue on SQLite's write lock).
        Rolled back on any error, like :meth:`write`; a connection that failed to roll back is dropped."""
        with self._kept("BEGIN IMMEDIATE") as transaction:
            yield transaction

    @contextmanager
    def write_prepared(self) -> Iterator[Connection | DriverTransaction]:
        """A write transaction for statements run prepared (:mod:`baton.store.prepared`, the receipt append): on
        SQLite :meth:`write_driver`, elsewhere :meth:`write`."""
        if self.is_sqlite:
            with self.write_driver() as transaction:
                yield transaction
        else:
            with self.write() as connection:
                yield connection

    @contextmanager
    def read_prepared(self) -> Iterator[Connection | DriverTransaction]:
        """One read snapshot for statements run prepared: on SQLite a deferred ``BEGIN`` on the kept driver
        connection, elsewhere :meth:`read`."""
        if self.is_sqlite:
            with self._kept("BEGIN") as transaction:
                yield transaction
        else:
            with self.read() as connection:
                yield connection

    @contextmanager
    def _kept(self, begin: str) -> Iterator[DriverTransaction]:
        """A transaction on the kept driver connection (see :meth:`write_driver`); not re-entrant: a
        transaction opened inside another on the same thread is refused rather than left to deadlock."""
        assert self.is_sqlite, "the kept driver connection is for SQLite stores"
        if self._hot_owner == threading.get_ident():
            raise RuntimeError("a kept-connection transaction was opened inside another on the same thread")
        with self._hot_lock:
            self._hot_owner = threading.get_ident()
            pooled = self._hot if self._hot is not None else self.engine.raw_connection()
            keep = not isinstance(self.engine.pool, NullPool)
            driver = pooled.driver_connection
            assert driver is not None
            try:
                driver.execute(begin)
                try:
                    transaction = DriverTransaction(self.engine.dialect, driver, {})
                    yield transaction
                    for step in (transaction.before_commit or {}).values():
                        step()
                    driver.execute("COMMIT")
                except BaseException:
                    driver.execute("ROLLBACK")
                    raise
            except BaseException:
                keep = keep and not driver.in_transaction
                raise
            finally:
                self._hot_owner = None
                if keep:
                    self._hot = pooled
                else:
                    self._hot = None
                    pooled.close()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only connection (a deferred transaction on SQLite)."""
        with self.engine.connect() as connection:
            yield connection.execution_options(baton_readonly=True)

    @property
    def quick_reads(self) -> bool:
        """Whether :meth:`quick_reader` may be used: a SQLite file store (a pooled connection sees the file)."""
        return self.is_sqlite and not isinstance(self.engine.pool, NullPool)

    @contextmanager
    def quick_reader(self) -> Iterator[DriverTransaction]:
        """SQLite file stores only (:attr:`quick_reads`): the driver connection kept for short reads made
        where they are asked (the per-request identity check, a proxied call's liveness read), run with
        :class:`baton.store.prepared.Prepared`: no worker thread, pool checkout or SQLAlchemy execution
        machinery. The connection is in autocommit, so each statement is its own read transaction and
        sees every transaction committed before it (a revocation or a demotion holds from the next read);
        a WAL read never waits for a writer. Taken in turns under a lock; a connection that failed is
        dropped."""
        assert self.quick_reads, "quick_reader is for SQLite file stores"
        with self._reader_lock:
            if self._reader is None:
                self._reader = self.engine.raw_connection()
            try:
                yield DriverTransaction(self.engine.dialect, self._reader.driver_connection)
            except BaseException:
                reader, self._reader = self._reader, None
                reader.close()
                raise

    def run_write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` inside one write transaction and return its result."""
        with self.write() as connection:
            return fn(connection)

    def run_read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read connection and return its result."""
        with self.read() as connection:
            return fn(connection)

    def dispose(self) -> None:
        """Close every pooled connection (the one :meth:`write_driver` keeps too)."""
        with self._hot_lock:
            if self._hot is not None:
                self._hot.close()
                self._hot = None
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self.engine.dispose()
