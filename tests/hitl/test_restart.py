"""Requests outlive the server: kill -9 with an approval in flight, restart, the request is still pending."""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import select

from baton.runtime import Runtime
from baton.store.leases import owner_pid
from baton.store.schema import hitl_requests
from tests.conftest import call, stdio_session
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio


@pytest.fixture
def baton_env(baton_env: dict[str, str]) -> dict[str, str]:
    """These tests play the operator through MCP, so they opt in to MCP decisions."""
    return {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}


def _owner_pid(runtime: Runtime, request_id: str) -> int:
    with runtime.store.read() as connection:
        owner = connection.execute(
            select(hitl_requests.c.owner).where(hitl_requests.c.id == request_id)
        ).scalar_one()
    pid = owner_pid(owner)
    assert pid is not None
    return pid


async def test_a_request_survives_kill_9_and_is_decided_after_restart(
    baton_env: dict[str, str], runtime: Runtime
) -> None:
    in_flight: list[Any] = []
    crashed = False
    try:
        with anyio.fail_after(300):
            async with stdio_session(baton_env) as session:

                async def ask() -> None:
                    args = {"request_message": "Survive a crash?", "timeout_seconds": 300, "urgent": True}
                    in_flight.append(await session.call_tool("mcp_request_admin_approval", args))

                async with anyio.create_task_group() as group:
                    group.start_soon(ask)
                    request_id = (await pending_requests(session))[0]["request_id"]
                    os.kill(_owner_pid(runtime, request_id), signal.SIGKILL)
                    await anyio.sleep_forever()  # until the dead connection ends the session
    except* MCPError:  # the client sees its server vanish mid-call
        crashed = True
    assert crashed
    assert in_flight == [], "the call returned a result although its server was killed"

    async with stdio_session(baton_env) as session:
        rows = (await call(session, "mcp_list_pending_requests"))["requests"]
        assert [row["request_id"] for row in rows] == [request_id] and rows[0]["urgent"] is True
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        assert status["status"] == "pending"
        decided = await call(
            session,
            "mcp_respond_to_request",
            {"request_id": request_id, "approved": True, "admin_notes": "after restart"},
        )
        assert decided["success"] is True and decided["waiter_gone"] is True
        resumed = await call(
            session, "mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 5}
        )
        assert (
            resumed["success"] is True
            and resumed["approved"] is True
            and resumed["admin_notes"] == "after restart"
        )
    kinds = [receipt.kind for receipt in runtime.receipts.list(limit=1000)]
    assert "hitl_requested" in kinds and "hitl_decided" in kinds
    assert runtime.receipts.verify().ok
