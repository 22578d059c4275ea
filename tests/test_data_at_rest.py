"""Data at rest, seen from a real ``baton serve`` process: private file modes and no secret in any file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from baton.testing import FakeLLMServer
from tests.conftest import call, stdio_session

pytestmark = pytest.mark.anyio


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def mirrored_env(model_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """model_env with every mirror file baton can write switched on, in a directory others may read."""
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir(mode=0o755)
    return {
        **model_env,
        "COLLAB_LLM_RECEIPT_PATH": str(mirrors / "llm_receipts.json"),
        "BATON_MODEL_REQUEST_LOG": str(mirrors / "model_requests.jsonl"),
        "TIMER_STORAGE_PATH": str(mirrors / "timers.json"),
    }


async def test_a_serving_process_keeps_its_home_database_and_mirrors_private(
    mirrored_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    home = Path(mirrored_env["BATON_HOME"])
    # a home left by an older baton: world-readable directory and database
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # noqa: S103 -- the loose home under test
    (home / "baton.db").touch()
    os.chmod(home / "baton.db", 0o644)
    async with stdio_session(mirrored_env) as session:
        spawned = await call(session, "mcp_spawn_subagent", {"task": "Say hello.", "mode": "sync"})
        assert spawned["success"] is True, spawned
        timer = await call(
            session, "mcp_set_timer", {"name": "later", "delay_seconds": 3600, "action": {"kind": "record"}}
        )
        assert timer["success"] is True, timer
        # while the server runs, SQLite's WAL companions exist
        database = home / "baton.db"
        assert (home / "baton.db-wal").exists()
        assert (home / "baton.db-shm").exists()
        assert mode(home) == 0o700
        for path in (database, home / "baton.db-wal", home / "baton.db-shm"):
            assert mode(path) == 0o600, path
        for name in ("COLLAB_LLM_RECEIPT_PATH", "BATON_MODEL_REQUEST_LOG", "TIMER_STORAGE_PATH"):
            path = Path(mirrored_env[name])
            assert path.is_file(), name
            assert mode(path) == 0o600, name
