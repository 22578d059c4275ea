"""How many requests wait is counted up to ``COUNT_CAP``: exact up to it, "1000+" past it, in the tool's
page, the live stream's state and the inbox's list and title (a count of every row walked the whole index)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import insert
from starlette.applications import Starlette

from baton.config import load_settings
from baton.hitl.broker import HitlBroker
from baton.hitl.inbox import routes
from baton.hitl.live import state
from baton.hitl.pending_count import COUNT_CAP, PendingCount
from baton.runtime import Runtime
from baton.store.schema import hitl_requests
from tests.servers import uvicorn_in_thread

pytestmark = pytest.mark.anyio

TOKEN = "pending-count-token-0123456789"


def fill(runtime: Runtime, count: int, agent: str) -> None:
    """``count`` pending approvals of ``agent``, shaped as the broker writes them, inserted in bulk."""
    now = time.time()
    rows: list[dict[str, Any]] = [
        {
            "id": f"hr_{uuid.uuid4().hex[:20]}",
            "kind": "approval",
            "message": f"Approve step {index}?",
            "context": {"step": index},
            "options": None,
            "urgent": False,
            "status": "pending",
            "created_at": datetime.fromtimestamp(now, UTC).isoformat(),
            "expires_at": datetime.fromtimestamp(now + 3600 + index, UTC).isoformat(),
            "expires_epoch": now + 3600 + index,
            "agent": agent,
        }
        for index in range(count)
    ]
    with runtime.store.write() as connection:
        connection.execute(insert(hitl_requests), rows)


def test_a_reading_is_exact_up_to_the_cap_and_a_lower_bound_past_it() -> None:
    assert PendingCount.read(0) == PendingCount(0, True)
    assert PendingCount.read(COUNT_CAP) == PendingCount(COUNT_CAP, True)
    assert PendingCount.read(COUNT_CAP + 1) == PendingCount(COUNT_CAP, False)
    assert PendingCount.read(COUNT_CAP).label == str(COUNT_CAP)
    assert PendingCount.read(COUNT_CAP + 1).label == f"{COUNT_CAP}+"


async def test_the_count_is_exact_at_the_cap_and_says_so_past_it(
    broker: HitlBroker, runtime: Runtime
) -> None:
    fill(runtime, COUNT_CAP, "ada")
    fill(runtime, 3, "bob")
    ada = broker.page_pending(10, agent="ada")
    assert (ada.total, ada.total_exact, len(ada.requests)) == (COUNT_CAP, True, 10)
    bob = broker.page_pending(10, agent="bob")
    assert (bob.total, bob.total_exact) == (3, True)  # one agent's count is its own rows
    every = broker.page_pending(10)
    assert (every.total, every.total_exact) == (COUNT_CAP, False)  # 1,003 pending in all
    assert state(runtime)["pending"] == COUNT_CAP and state(runtime)["pending_exact"] is False
    # the cursor's next page counts the same
    assert every.next_cursor is not None
    after = broker.page_pending(10, every.next_cursor)
    assert (after.total, after.total_exact) == (COUNT_CAP, False)


def test_below_the_cap_the_live_state_is_exact(runtime: Runtime) -> None:
    fill(runtime, 7, "ada")
    assert {key: value for key, value in state(runtime).items() if key != "version"} == {
        "pending": 7,
        "pending_exact": True,
    }


@pytest.fixture
def token_runtime(baton_env: dict[str, str]) -> Iterator[Runtime]:
    opened = Runtime.open(load_settings({**baton_env, "BATON_ADMIN_TOKEN": TOKEN}))
    yield opened
    opened.close()


def test_the_inbox_shows_past_the_cap_as_a_plus_in_its_heading_and_title(token_runtime: Runtime) -> None:
    fill(token_runtime, COUNT_CAP + 1, "ada")
    with (
        uvicorn_in_thread(Starlette(routes=routes(token_runtime))) as base_url,
        httpx.Client(base_url=base_url, follow_redirects=False, timeout=30) as client,
    ):
        assert client.post("/inbox/login", data={"token": TOKEN}).status_code == 303
        page = client.get("/inbox")
    assert page.status_code == 200
    assert f"<h2>Pending requests ({COUNT_CAP}+)</h2>" in page.text
    assert f"<title>({COUNT_CAP}+) " in page.text


def test_the_count_stops_reading_rows_at_the_cap(runtime: Runtime) -> None:
    """SQLite's own virtual-machine steps (a progress handler, not a clock): the capped count runs as many
    steps with twenty times the cap pending as with twice it, while counting every row grows with them."""
    from sqlalchemy import func, select

    from baton.hitl.pending_count import capped_count

    pending = hitl_requests.c.status == "pending"

    def steps(statement: Any) -> tuple[int, int]:
        ticks = 0

        def tick() -> int:
            nonlocal ticks
            ticks += 1
            return 0  # go on

        with runtime.store.read() as connection:
            driver = connection.connection.driver_connection
            driver.set_progress_handler(tick, 100)
            try:
                counted = int(connection.execute(statement).scalar_one())
            finally:
                driver.set_progress_handler(None, 100)
        return counted, ticks

    fill(runtime, 2 * COUNT_CAP, "ada")
    few = steps(select(capped_count(pending))), steps(select(func.count()).where(pending))
    fill(runtime, 18 * COUNT_CAP, "ada")
    many = steps(select(capped_count(pending))), steps(select(func.count()).where(pending))
    assert [few[0][0], many[0][0], few[1][0], many[1][0]] == [COUNT_CAP + 1] * 2 + [
        2 * COUNT_CAP,
        20 * COUNT_CAP,
    ]
    assert many[0][1] == few[0][1], (few, many)  # capped: the same steps however many wait
    assert many[1][1] > 5 * few[1][1], (few, many)  # every row: the steps grow with the rows
