"""A store opens while another process holds its SQLite file locked, instead of failing its start-up."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.store.engine import Store

#: Longer than the sqlite3 module's default busy timeout (5 s), which the first statement of a new
#: connection waited on before the store set its own.
HELD_SECONDS = 7

OPENER = """
import sqlite3, sys
from baton.store.engine import Store
Store("sqlite:///" + sys.argv[1])
print(sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode").fetchone()[0])
"""


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_store_opens_once_another_process_lets_go_of_the_lock(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "baton.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute(f"PRAGMA journal_mode={journal}")
    holder.execute("CREATE TABLE someone_elses (a)")
    holder.execute("BEGIN EXCLUSIVE")  # a new file's switch to WAL, or a migration, holds it like this
    holder.execute("INSERT INTO someone_elses VALUES (1)")
    opener = subprocess.Popen(
        [sys.executable, "-c", OPENER, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            opener.wait(timeout=HELD_SECONDS)  # still waiting for the lock, not failed
    finally:
        holder.execute("COMMIT")
        holder.close()
    out, err = opener.communicate(timeout=120)

    assert opener.returncode == 0, err[-2000:]
    assert out.strip() == "wal"
    assert Store(f"sqlite:///{path}").is_sqlite  # opens at once now


def test_a_store_that_is_no_database_still_fails_at_once(tmp_path: Path) -> None:
    path = tmp_path / "baton.db"
    path.write_bytes(b"this is not a database file, and waiting will not make it one" * 100)
    with pytest.raises(StoreError) as raised:
        Store(f"sqlite:///{path}")
    assert raised.value.error_class == "store_unavailable"
