"""One corrupted row does not break a list: it is skipped and reported (``skipped: [{id, reason}]``), and the
rest is answered. Rows are damaged with sqlite3 in the store of a real ``baton serve`` (stdio)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import call, stdio_session

pytestmark = pytest.mark.anyio

RECORD = {"kind": "record"}


def corrupt(env: dict[str, str], statement: str, *values: object) -> None:
    with sqlite3.connect(Path(env["BATON_HOME"]) / "baton.db") as db:
        assert db.execute(statement, values).rowcount == 1


async def test_a_text_expiry_or_bad_json_in_a_request_is_skipped_and_the_rest_listed(
    baton_env: dict[str, str],
) -> None:
    env = {**baton_env, "HITL_TIMEOUT_SECONDS": "3600"}
    async with stdio_session(env) as session, anyio.create_task_group() as group:
        for n in range(4):
            group.start_soon(call, session, "mcp_request_admin_approval", {"request_message": f"ask {n}"})
        with anyio.fail_after(300):
            while (listed := await call(session, "mcp_list_pending_requests"))["count"] < 4:
                await anyio.sleep(0.05)
        ids = {row["message"]: row["request_id"] for row in listed["requests"]}
        corrupt(env, "UPDATE hitl_requests SET expires_epoch = 'soon' WHERE id = ?", ids["ask 1"])
        corrupt(env, "UPDATE hitl_requests SET context = '{not json' WHERE id = ?", ids["ask 2"])
        answer = await call(session, "mcp_list_pending_requests")
        first = await call(session, "mcp_list_pending_requests", {"limit": 1})
        pages: list[dict[str, Any]] = [first]
        with anyio.fail_after(300):
            while pages[-1]["next_cursor"]:
                cursor = pages[-1]["next_cursor"]
                pages.append(await call(session, "mcp_list_pending_requests", {"limit": 1, "cursor": cursor}))
        group.cancel_scope.cancel()
    assert answer["success"] is True, answer
    assert sorted(row["message"] for row in answer["requests"]) == ["ask 0", "ask 3"]
    assert answer["count"] == 2
    assert sorted(answer["skipped"], key=lambda s: s["request_id"]) == sorted(
        [
            {"request_id": ids["ask 1"], "reason": "expires_epoch is not a number"},
            {"request_id": ids["ask 2"], "reason": "context is not valid JSON"},
        ],
        key=lambda s: s["request_id"],
    )
    # page by page: every request is either listed or skipped exactly once, and the walk ends
    listed_ids = [row["request_id"] for page in pages for row in page["requests"]]
    skipped_ids = [entry["request_id"] for page in pages for entry in page["skipped"]]
    assert sorted(listed_ids) == sorted([ids["ask 0"], ids["ask 3"]])
    assert sorted(skipped_ids) == sorted([ids["ask 1"], ids["ask 2"]])


async def test_a_corrupted_subagent_or_timer_row_is_skipped_and_the_rest_listed(
    model_env: dict[str, str],
) -> None:
    async with stdio_session(model_env) as session:
        spawned = [
            await call(session, "mcp_spawn_subagent", {"task": f"Say hello {n}.", "mode": "sync"})
            for n in range(3)
        ]
        timers = [
            await call(session, "mcp_set_timer", {"name": f"t{n}", "delay_seconds": 3600, "action": RECORD})
            for n in range(3)
        ]
        assert all(r["success"] for r in [*spawned, *timers]), [*spawned, *timers]
        bad_subagent, bad_timer = spawned[1]["subagent_id"], timers[1]["timer_id"]
        corrupt(model_env, "UPDATE subagents SET task = X'DEADBEEF' WHERE id = ?", bad_subagent)
        corrupt(model_env, "UPDATE timers SET action = '{oops' WHERE id = ?", bad_timer)
        subagents = await call(session, "mcp_list_subagents")
        timer_list = await call(session, "mcp_list_timers")
        small = await call(session, "mcp_list_timers", {"limit": 1})
        pages = [small]
        with anyio.fail_after(300):
            while pages[-1]["next_cursor"]:
                cursor = pages[-1]["next_cursor"]
                pages.append(await call(session, "mcp_list_timers", {"limit": 1, "cursor": cursor}))
    assert subagents["success"] is True, subagents
    assert sorted(row["subagent_id"] for row in subagents["subagents"]) == sorted(
        r["subagent_id"] for r in spawned if r["subagent_id"] != bad_subagent
    )
    (skipped,) = subagents["skipped"]
    assert skipped["subagent_id"] == bad_subagent and skipped["reason"].startswith("task:")
    assert timer_list["success"] is True, timer_list
    assert [row["name"] for row in timer_list["timers"]] == ["t0", "t2"]
    assert timer_list["skipped"] == [{"timer_id": bad_timer, "reason": "action is not valid JSON"}]
    walked = [row["name"] for page in pages for row in page["timers"]]
    assert walked == ["t0", "t2"]
    assert [entry["timer_id"] for page in pages for entry in page["skipped"]] == [bad_timer]


def test_the_console_views_leave_out_corrupted_rows(model_env: dict[str, str]) -> None:
    from baton.config import load_settings
    from baton.console import views
    from baton.runtime import Runtime

    async def seed() -> None:
        async with stdio_session(model_env) as session:
            for n in range(2):
                await call(
                    session, "mcp_set_timer", {"name": f"t{n}", "delay_seconds": 3600, "action": RECORD}
                )
            await call(session, "mcp_ping")

    anyio.run(seed)
    with sqlite3.connect(Path(model_env["BATON_HOME"]) / "baton.db") as db:
        (timer_id,) = db.execute("SELECT id FROM timers WHERE name = 't0'").fetchone()
        db.execute("UPDATE timers SET action = '{oops' WHERE id = ?", (timer_id,))
        db.execute("UPDATE receipts SET payload = '{broken' WHERE seq = 1")
    runtime = Runtime.open(load_settings(model_env))
    try:
        assert [row["name"] for row in views.timers(runtime)] == ["t1"]
        shown = views.receipts(runtime, None, None, None)
        assert json.loads(shown[-1]["payload"]) == {"unreadable_payload": True}
        assert views.requests(runtime) == {"pending": [], "decided": []}
    finally:
        runtime.close()


def test_listing_reads_raw_json_columns_alike_on_each_database(database_url: str, tmp_path: Path) -> None:
    from baton.config import Settings
    from baton.hitl.broker import HitlBroker
    from baton.hitl.records import NewRequest
    from baton.runtime import Runtime
    from baton.timers.service import TimerRequest, TimerService

    runtime = Runtime.open(Settings(baton_home=tmp_path / "home", baton_database_url=database_url))
    try:
        service = TimerService(runtime)
        for n in range(3):
            service.set(TimerRequest(name=f"t{n}", action=RECORD, delay_seconds=3600))
        page = service.page(None, 2)
        assert [row["action"] for row in page.rows] == [{"kind": "record"}] * 2
        assert page.skipped == [] and page.next_after is not None
        broker = HitlBroker(runtime)

        async def ask() -> None:
            await broker.create(
                NewRequest("input", "pick", context={"k": [1]}, options=["a"], timeout_seconds=60)
            )

        anyio.run(ask)
        pending = broker.page_pending(10)
        (listed,) = pending.requests
        assert (listed["context"], listed["options"], pending.skipped) == ({"k": [1]}, ["a"], [])
    finally:
        runtime.close()
