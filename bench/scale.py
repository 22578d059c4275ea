"""Scale: 100,000 pending requests listed, 10,000 timers due in the same second, store bytes per row.

Each store is filled in bulk through SQLAlchemy with rows shaped exactly as the broker and the timer
service write them (so the figures do not wait on 100,000 single inserts), then a real
``baton serve`` answers over stdio:

- ``mcp_list_pending_requests`` p50 over repeated calls with 100,000 pending (one page, urgent first);
- the time from the shared due second until every one of 10,000 ``record`` timers has fired once
  (``fire_count = 1`` for all, counted in the store), on one replica;
- the SQLite file's bytes per pending request, and per receipt after the timers' receipts.

``iterations == 1`` (the smoke) shrinks both to 1,000.
"""

from __future__ import annotations

import statistics
import time
import uuid
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import INITIALIZE_PARAMS, PipeClient, baton_command, baton_env, temp_home

PENDING = 100_000
TIMERS = 10_000
LIST_CALLS = 30
FIRE_DEADLINE_SECONDS = 120.0
#: The agent the benchmark's stdio client is: its ``clientInfo.name`` as a claim, since ``baton_env`` sets
#: no ``BATON_AGENT_NAME`` (baton.identity.agents.stdio_claim); the list shows only the calling agent's requests.
BENCH_AGENT: str = "stdio:" + INITIALIZE_PARAMS["clientInfo"]["name"]
#: The page ``mcp_list_pending_requests`` answers without a ``limit`` (baton.hitl.tools.DEFAULT_PAGE).
PAGE = 100


def _open_store(home: Path, database_url: str | None = None) -> Any:
    """The migrated store of ``home`` (or ``database_url``): a runtime whose ``store`` has the schema."""
    from baton.config import load_settings
    from baton.runtime import Runtime

    environ = {"BATON_HOME": str(home)}
    if database_url:
        environ["BATON_DATABASE_URL"] = database_url
    return Runtime.open(load_settings(environ))


def fill_pending(home: Path, count: int) -> None:
    """``count`` pending approval requests of the benchmark's agent, one in ten urgent, expiring in an hour."""
    from sqlalchemy import insert

    from baton.store.schema import hitl_requests

    runtime = _open_store(home)
    now = time.time()
    stamp = datetime.fromtimestamp(now, UTC).isoformat()
    expires = now + 3600
    rows = [
        {
            "id": f"hr_{uuid.uuid4().hex[:20]}",
            "kind": "approval",
            "message": f"Approve deployment {index} of the nightly build to staging?",
            "context": {"build": index, "risk": "low", "owner": "ci"},
            "options": None,
            "urgent": index % 10 == 0,
            "status": "pending",
            "created_at": stamp,
            "expires_at": datetime.fromtimestamp(expires + index, UTC).isoformat(),
            "expires_epoch": expires + index,
            "agent": BENCH_AGENT,
        }
        for index in range(count)
    ]
    with runtime.store.write() as connection:
        connection.execute(insert(hitl_requests), rows)
    runtime.close()


def list_pending_p50(home: Path) -> dict[str, Any]:
    """p50/p99 of ``mcp_list_pending_requests`` against a running ``baton serve``, and the page size."""
    samples: list[float] = []
    listed = 0
    with PipeClient(baton_command(), baton_env(home)) as client:
        client.initialize()
        for _ in range(LIST_CALLS + 3):
            started = time.perf_counter()
            result = client.call("tools/call", {"name": "mcp_list_pending_requests", "arguments": {}})
            samples.append(time.perf_counter() - started)
            listed = len(result["structuredContent"].get("requests", []))
    samples = samples[3:]  # the first calls load the registry and warm the caches
    if listed != PAGE:  # the seeded rows must be the caller's, or the figure measures an empty list
        raise RuntimeError(f"mcp_list_pending_requests listed {listed} requests, not a page of {PAGE}")
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[-1] * 1000, 2),
        "listed_per_call": listed,
    }


def fill_timers(home: Path, count: int, due: datetime, database_url: str | None = None) -> None:
    """``count`` one-shot ``record`` timers all due at ``due``."""
    from sqlalchemy import insert

    from baton.store.schema import timers
    from baton.timers.schedule import format_time

    runtime = _open_store(home, database_url)
    stamp = format_time(datetime.now(UTC))
    first = format_time(due)
    rows = [
        {
            "id": f"tm_{uuid.uuid4().hex[:20]}",
            "name": f"scale {index}",
            "schedule": "once",
            "interval_seconds": None,
            "action": {"kind": "record"},
            "status": "active",
            "first_fire_at": first,
            "next_fire_at": first,
            "fire_count": 0,
            "created_at": stamp,
            "updated_at": stamp,
            "created_by": "bench",
        }
        for index in range(count)
    ]
    with runtime.store.write() as connection:
        connection.execute(insert(timers), rows)
    runtime.close()


def fire_all_on_replicas(count: int) -> dict[str, Any] | None:
    """The same on two ``baton serve`` replicas sharing one PostgreSQL store (None without PostgreSQL)."""
    from sqlalchemy import create_engine, text

    from baton.testing.postgres import TemporaryPostgres, find_bin_dir

    if find_bin_dir() is None:
        return None
    with ExitStack() as stack:
        pg = stack.enter_context(TemporaryPostgres())
        homes = [stack.enter_context(temp_home()) for _ in range(2)]
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=6)
        fill_timers(homes[0], count, due, pg.url)
        engine = create_engine(pg.url)
        stack.callback(engine.dispose)

        def counts() -> tuple[int, int]:
            with engine.connect() as connection:
                once, twice = connection.execute(
                    text(
                        "SELECT count(*) FILTER (WHERE fire_count >= 1), count(*) FILTER (WHERE fire_count > 1) FROM timers"
                    )
                ).one()
            return int(once), int(twice)

        clients = [
            stack.enter_context(PipeClient(baton_command(), baton_env(home, BATON_DATABASE_URL=pg.url)))
            for home in homes
        ]
        for client in clients:
            client.initialize()
            client.call("tools/list")
        while datetime.now(UTC) < due:
            time.sleep(0.01)
        started = time.perf_counter()
        while (done := counts())[0] < count and time.perf_counter() - started < FIRE_DEADLINE_SECONDS:
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        with engine.connect() as connection:
            by_replica = connection.execute(
                text("SELECT count(DISTINCT last_fired_by) FROM timers WHERE fire_count >= 1")
            ).scalar_one()
    return {
        "timers": count,
        "fired": done[0],
        "fired_twice": done[1],
        "replicas_that_fired": int(by_replica),
        "seconds_to_all": round(elapsed, 2),
    }


def fired(home: Path) -> int:
    """How many timers have fired at least once (read-only on the SQLite file)."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM timers WHERE fire_count >= 1").fetchone()[0])


def receipts(home: Path) -> int:
    """How many receipts the store holds."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM receipts").fetchone()[0])


def fire_all(home: Path, count: int) -> dict[str, Any]:
    """Seconds from the due second until all ``count`` timers fired once, on one ``baton serve``."""
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    fill_timers(home, count, due)
    with PipeClient(baton_command(), baton_env(home)) as client:
        client.initialize()
        client.call("tools/list")
        while datetime.now(UTC) < due:
            time.sleep(0.01)
        started = time.perf_counter()
        while (done := fired(home)) < count:
            if time.perf_counter() - started > FIRE_DEADLINE_SECONDS:
                break
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        twice = _fired_twice(home)
    return {"timers": count, "fired": done, "fired_twice": twice, "seconds_to_all": round(elapsed, 2)}


def _fired_twice(home: Path) -> int:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM timers WHERE fire_count > 1").fetchone()[0])


def _database_bytes(home: Path) -> int:
    """The SQLite file with its write-ahead log, after a checkpoint."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(home / "baton.db")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in home.glob("baton.db*"))


def run(iterations: int) -> dict[str, Any]:
    """Both scale figures and the store's bytes per row."""
    pending = PENDING if iterations > 1 else 1_000
    timer_count = TIMERS if iterations > 1 else 1_000
    with ExitStack() as stack:
        home = stack.enter_context(temp_home())
        _open_store(home).close()
        empty = _database_bytes(home)
        fill_pending(home, pending)
        with_pending = _database_bytes(home)
        listing = list_pending_p50(home)
        timer_home = stack.enter_context(temp_home())
        _open_store(timer_home).close()
        before_receipts, before_bytes = receipts(timer_home), _database_bytes(timer_home)
        firing = fire_all(timer_home, timer_count)
        added_receipts = receipts(timer_home) - before_receipts
        timer_bytes = _database_bytes(timer_home) - before_bytes
    replicas = fire_all_on_replicas(timer_count) if iterations > 1 else None
    rows = [
        {"figure": f"mcp_list_pending_requests with {pending} pending", **listing},
        {"figure": f"{timer_count} timers due in the same second (one replica, SQLite)", **firing},
        {
            "figure": "store bytes per row (SQLite)",
            "per_pending_request": round((with_pending - empty) / pending),
            "per_fired_timer_with_its_receipts": round(timer_bytes / max(1, timer_count)),
            "receipts_per_fired_timer": round(added_receipts / max(1, timer_count), 2),
        },
    ]
    if replicas is not None:
        rows.insert(
            2,
            {"figure": f"{timer_count} timers due in the same second (two replicas, PostgreSQL)", **replicas},
        )
    full = iterations > 1
    return {
        "title": "scale: pending requests, timers due at once, store size",
        "rows": rows,
        "targets": [
            {
                "what": "mcp_list_pending_requests p50 with 100,000 pending <= 50 ms",
                "value": listing["p50_ms"] if full else None,
                "met": listing["p50_ms"] <= 50 if full else None,
            },
            {
                "what": "10,000 timers due at the same second all fire once within 10 s (one replica)",
                "value": firing["seconds_to_all"] if full else None,
                "met": (
                    firing["fired"] == timer_count
                    and firing["fired_twice"] == 0
                    and firing["seconds_to_all"] <= 10
                )
                if full
                else None,
            },
        ],
    }


if __name__ == "__main__":
    import sys

    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
