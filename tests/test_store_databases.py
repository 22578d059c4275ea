"""The store on both databases: schema creation, the receipt chain under concurrent writers, subagent state."""

from __future__ import annotations

import subprocess
import sys

import pytest

from baton.config import Settings
from baton.evidence.receipts import ReceiptLog, Redactor
from baton.runtime import Runtime
from baton.store.engine import Store, normalize_url
from baton.subagents.runner import SpawnRequest, SubagentRunner
from baton.testing import FakeLLMServer
from tests.conftest import FAKE_MOONSHOT_KEY, SRC

WRITER = """
import sys
from baton.evidence.receipts import ReceiptLog, Redactor
from baton.store.engine import Store
log = ReceiptLog(Store(sys.argv[1]), Redactor())
for n in range(int(sys.argv[3])):
    log.append("concurrent", {"writer": int(sys.argv[2]), "n": n})
"""


def test_async_driver_urls_run_on_psycopg() -> None:
    assert normalize_url("postgresql+asyncpg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_the_schema_is_created_and_an_empty_chain_verifies(database_url: str) -> None:
    store = Store(database_url)
    Store(database_url).dispose()  # a second open of an existing schema is harmless
    report = ReceiptLog(store, Redactor()).verify()
    store.dispose()
    assert report.ok
    assert report.count == 0


def test_eight_concurrent_writers_keep_the_chain_linear(database_url: str) -> None:
    Store(database_url).dispose()
    env = {"PYTHONPATH": str(SRC)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, database_url, str(w), "25"], env=env)
        for w in range(8)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0] * 8
    store = Store(database_url)
    log = ReceiptLog(store, Redactor())
    report = log.verify()
    rows = log.list(limit=1000)
    store.dispose()
    assert report.ok, report
    assert report.count == 200
    assert [r.seq for r in rows] == list(range(1, 201))
    assert {(r.payload["writer"], r.payload["n"]) for r in rows} == {
        (w, n) for w in range(8) for n in range(25)
    }


@pytest.mark.anyio
async def test_subagent_state_round_trips(database_url: str, fake_llm: FakeLLMServer, tmp_path) -> None:
    settings = Settings.model_validate(
        {
            "baton_home": tmp_path / "home",
            "baton_database_url": database_url,
            "collab_provider": "moonshot",
            "moonshot_api_key": FAKE_MOONSHOT_KEY,
            "openai_base_url": fake_llm.base_url,
        }
    )
    runner = SubagentRunner(Runtime.open(settings))
    spawned = await runner.spawn(
        SpawnRequest(task="hello", context_strategy="full", parent_context={"a": {"b": 1}, "secret": "x"})
    )
    reply = await runner.send_message(spawned["subagent_id"], "again")
    await runner.aclose()
    assert reply["turn"] == 2
    status = runner.status(spawned["subagent_id"])
    assert status["filtered_fields"] == ["secret"]
    assert status["usage"]["total_tokens"] > 0
    assert runner.runtime.receipts.verify().ok
    runner.runtime.close()
