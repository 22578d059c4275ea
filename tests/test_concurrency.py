"""The store's concurrency promises with the interleaving forced, on SQLite and on PostgreSQL.

First decision wins, each due time fires at most once, and the receipt chain has one head. Each test
stops a transaction between its read and its write (a SQLAlchemy ``before_cursor_execute`` hook, or the
test holding the transaction itself) and lets a competitor act in that gap, so the outcome never depends
on thread scheduling.

On PostgreSQL the competitor is a second engine in another thread that commits in the gap. SQLite
serializes writers (``BEGIN IMMEDIATE``), so no second connection can write in the gap; there the hook
writes the competitor's committed change on the same connection, which is what a stale read would have
missed. Either way the conditional UPDATE, not the earlier read, has to refuse the second write.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text

from baton.config import Settings
from baton.errors import HitlError
from baton.evidence.receipts import _chain_head
from baton.hitl.broker import Decision, HitlBroker, NewRequest
from baton.runtime import Runtime
from baton.timers.schedule import format_time, now_utc
from baton.timers.service import TimerRequest, TimerService

pytestmark = pytest.mark.anyio


@pytest.fixture
def runtime(tmp_path: Path, database_url: str) -> Iterator[Runtime]:
    rt = Runtime.open(Settings(baton_home=tmp_path / "home", baton_database_url=database_url))
    yield rt
    rt.close()


@pytest.fixture
def other(runtime: Runtime) -> Iterator[Runtime]:
    """A second runtime on the same store: its own engine and connections, like another process."""
    rt = Runtime.open(runtime.settings)
    yield rt
    rt.close()


@contextmanager
def in_the_gap(
    engine: Engine, statement_prefix: str, compete: Callable[[Connection], None]
) -> Iterator[None]:
    """Run ``compete(connection)`` once, just before the first statement starting with ``statement_prefix``."""
    done = threading.Event()

    def hook(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        if not done.is_set() and " ".join(statement.split()).upper().startswith(statement_prefix):
            done.set()
            compete(conn)

    event.listen(engine, "before_cursor_execute", hook)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", hook)
    assert done.is_set(), f"no {statement_prefix} statement ran"


def in_thread(work: Callable[[], Any]) -> Any:
    """Run ``work`` to completion in another thread; its result or the exception it raised."""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(work())
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the competitor is stuck"
    return box[0]


def driver_execute(conn: Connection, sql: str, params: tuple[Any, ...]) -> None:
    """A statement straight on the DB-API connection (no SQLAlchemy events: no recursion into the hook)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute(sql, params)


async def test_first_decision_wins_when_both_read_pending_before_either_writes(
    runtime: Runtime, other: Runtime
) -> None:
    if not runtime.store.is_sqlite:
        pytest.skip(
            "on PostgreSQL a decision locks the request row first (SELECT ... FOR UPDATE, for quorum), so two "
            "deciders can no longer both read pending; racing deciders there: tests/hitl/test_people.py"
        )
    mine, theirs = HitlBroker(runtime), HitlBroker(other)
    view = await mine.create(NewRequest("approval", "Ship it?", timeout_seconds=60))
    request_id = view["request_id"]
    competitor: list[Any] = []

    def compete(conn: Connection) -> None:  # we have read "pending"; the other decider commits now
        if runtime.store.is_sqlite:
            driver_execute(
                conn,
                "UPDATE hitl_requests SET status = 'rejected', approved = 0 WHERE id = ?",
                (request_id,),
            )
            competitor.append({"status": "rejected"})
        else:
            competitor.append(in_thread(lambda: theirs.respond(request_id, Decision(approved=False))))

    with (
        in_the_gap(runtime.store.engine, "UPDATE HITL_REQUESTS", compete),
        pytest.raises(HitlError) as refused,
    ):
        mine.respond(request_id, Decision(approved=True))
    assert refused.value.error_class == "hitl_request_already_decided"
    assert refused.value.details == {"request_id": request_id}
    assert isinstance(competitor[0], dict) and competitor[0]["status"] == "rejected", competitor
    final = mine.get(request_id)  # on SQLite the refusal rolled back the simulated write with its own
    assert final["status"] == ("pending" if runtime.store.is_sqlite else "rejected")
    assert final["approved"] is not True
    decided = [r for r in runtime.receipts.list(kind="hitl_decided") if r.payload["request_id"] == request_id]
    assert len(decided) == (0 if runtime.store.is_sqlite else 1)  # the simulated decider writes no receipt


def test_a_due_time_fires_once_when_both_claimers_read_it_before_either_writes(
    runtime: Runtime, other: Runtime
) -> None:
    mine, theirs = TimerService(runtime), TimerService(other)
    timer = mine.set(TimerRequest(name="tick", action={"kind": "record"}, interval_seconds=5))
    timer_id, due = timer["timer_id"], timer["next_fire_at"]
    later = now_utc() + timedelta(seconds=6)
    competitor: list[Any] = []

    def compete(conn: Connection) -> None:  # we have read "active, due at `due`"; the other claims it now
        if runtime.store.is_sqlite:
            driver_execute(
                conn,
                "UPDATE timers SET next_fire_at = ?, fire_count = fire_count + 1 WHERE id = ?",
                (format_time(later + timedelta(seconds=4)), timer_id),
            )
            competitor.append("claimed")
        else:
            competitor.append(in_thread(lambda: theirs.claim(timer_id, due, later, missed=False)))

    with in_the_gap(runtime.store.engine, "UPDATE TIMERS", compete):
        assert mine.claim(timer_id, due, later, missed=False) is None
    assert competitor[0] is not None and not isinstance(competitor[0], Exception), competitor
    assert mine.get(timer_id)["fire_count"] == 1


def test_the_receipt_chain_has_one_head_while_a_writer_holds_it(runtime: Runtime, other: Runtime) -> None:
    """While one transaction has read the chain head, no other appender can read it (and fork the chain)."""
    appended: list[Any] = []
    with runtime.store.write() as conn:
        head = _chain_head(conn)
        assert head is not None
        thread = threading.Thread(target=lambda: appended.append(other.receipts.append("theirs", {"n": 2})))
        thread.start()
        if runtime.store.is_sqlite:
            probe = sqlite3.connect(runtime.store.engine.url.database or "", timeout=0, isolation_level=None)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    probe.execute("BEGIN IMMEDIATE")
            finally:
                probe.close()
        else:
            wait_until_blocked_on_a_lock(runtime, thread)
        assert not appended, "another appender read the chain head while this transaction held it"
        runtime.receipts.append_in(conn, "mine", {"n": 1})
    thread.join(30)
    assert [r.kind for r in runtime.receipts.list()][-2:] == ["mine", "theirs"]
    report = runtime.receipts.verify()
    assert report.ok and report.count == head[0] + 2


def wait_until_blocked_on_a_lock(runtime: Runtime, appender: threading.Thread) -> None:
    """Poll pg_stat_activity until another backend waits on a lock (fails if the appender finishes first)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    with runtime.store.engine.connect() as watcher:
        while not watcher.execute(query).scalar():
            assert appender.is_alive(), "the appender did not wait for the chain head"
            appender.join(0.02)
