"""The JSON mirror of the timers at ``TIMER_STORAGE_PATH``: an atomically rewritten copy of the store.

The store is the source of truth; the mirror is rewritten from the store after every change, under a
lock file (in ``BATON_HOME``) so that the last writer always writes the latest committed state. A fresh
store adopts the well-formed timers the mirror lists and the store does not know.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from baton.errors import TimerError
from baton.evidence.receipts import canonical_json, sha256_hex, utc_now
from baton.runtime import Runtime
from baton.store.private import private_dir
from baton.store.schema import timers
from baton.timers.schedule import MIN_INTERVAL_SECONDS, format_time, parse_action, parse_time

log = logging.getLogger("baton.timers")

MIRROR_VERSION = 1
#: The statuses a timer can have (a mirror entry with another is not adopted).
STATUSES = ("active", "completed", "cancelled")


@contextlib.contextmanager
def locked(path: Path, lock_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock for the mirror at ``path`` (a file in ``lock_dir``, not beside the mirror)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    private_dir(lock_dir)  # BATON_HOME/locks: 0700, its lock files 0600
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    fd = os.open(lock_dir / f"timers-mirror-{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the mirror with ``entries`` atomically (temp file in the same directory, fsync, rename)."""
    document = {"version": MIRROR_VERSION, "written_at": utc_now(), "timers": entries}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read(path: Path) -> list[dict[str, Any]]:
    """The timers listed in the mirror, or nothing when it is absent or unreadable."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = document.get("timers") if isinstance(document, dict) else None
    return [t for t in entries if isinstance(t, dict)] if isinstance(entries, list) else []


def sync(runtime: Runtime) -> None:
    """Rewrite ``TIMER_STORAGE_PATH`` from the store (a failure is logged, never raised)."""
    path = runtime.settings.timer_storage_path
    if path is None:
        return
    try:
        with locked(path, runtime.settings.home / "locks"):
            with runtime.store.read() as connection:
                rows = [
                    dict(row._mapping)
                    for row in connection.execute(
                        # a request's escalation steps live and die with the request, not in the mirror
                        select(timers)
                        .where(timers.c.request_id.is_(None))
                        .order_by(timers.c.created_at, timers.c.id)
                    )
                ]
            write(path, runtime.redactor.value(rows))
    except OSError:
        log.exception("could not write the timer mirror at %s", path)


def adopt(runtime: Runtime) -> int:
    """Import timers the mirror lists but the store does not know (a fresh store); returns how many."""
    path = runtime.settings.timer_storage_path
    if path is None:
        return 0
    adopted = 0
    columns = set(timers.c.keys())
    for entry in read(path):
        row = {key: value for key, value in entry.items() if key in columns}
        if not _adoptable(row):
            log.warning("skipping a malformed timer in the mirror at %s", path)
            continue
        with runtime.store.write() as connection:
            if connection.execute(select(timers.c.id).where(timers.c.id == row["id"])).first():
                continue
            connection.execute(insert(timers).values(**row))
            runtime.receipts.append_in(
                connection,
                "timer_adopted",
                {
                    "timer_id": row["id"],
                    "name": row["name"],
                    "source_sha256": sha256_hex(canonical_json(row)),
                },
            )
        adopted += 1
    return adopted


def _adoptable(row: dict[str, Any]) -> bool:
    required = ("id", "name", "schedule", "action", "status", "first_fire_at", "created_at", "updated_at")
    if row.get("request_id") is not None:  # an escalation step belongs to a request in some store
        return False
    if any(not row.get(key) for key in required) or row["status"] not in STATUSES:
        return False
    if row["schedule"] not in ("once", "interval"):
        return False
    if row["schedule"] == "interval" and not _is_number_at_least(
        row.get("interval_seconds"), MIN_INTERVAL_SECONDS
    ):
        return False
    try:
        parse_action(row["action"])
        for key in ("first_fire_at", "next_fire_at"):
            if row.get(key):
                moment = parse_time(str(row[key]))
                if moment.tzinfo is None:
                    return False
                row[key] = format_time(moment)
    except (TimerError, ValueError):
        return False
    if row["status"] == "active" and not row.get("next_fire_at"):
        return False
    row.setdefault("fire_count", 0)
    return True


def _is_number_at_least(value: Any, minimum: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= minimum
