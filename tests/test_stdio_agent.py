"""A stdio agent is named by the operator (``BATON_AGENT_NAME``), never by its client's ``clientInfo.name``.

Through real ``baton serve`` processes: the official ``mcp.Client`` over stdio in both protocol eras, beside
a ``baton serve --http`` where the agent ``beta`` is registered. A client that calls itself ``beta`` or
``operator`` is recorded as the claim ``stdio:…``, which owns nothing of theirs; elicitation, on, never
lets it approve anything.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.cli_process import run_cli
from tests.hitl.helpers import pending_requests
from tests.servers import free_port, http_server
from tests.test_agents import FOREVER, add_agent, http_client, receipts, structured

pytestmark = pytest.mark.anyio

TIMER = {"name": "t", "delay_seconds": FOREVER, "action": {"kind": "record"}}


@asynccontextmanager
async def stdio_as(
    env: dict[str, str], name: str, mode: str = "auto", **options: Any
) -> AsyncIterator[Client]:
    """``baton serve`` over stdio, driven by the official client introducing itself as ``name``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    info = types.Implementation(name=name, version="1.0")
    async with Client(params, client_info=info, mode=mode, **options) as client:  # type: ignore[arg-type]
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_calling_itself_beta_cannot_list_wait_on_or_approve_betas_request(
    baton_env: dict[str, str], tmp_path: Path, mode: str
) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    beta = add_agent(env, "beta")
    asked: list[Any] = []

    async def approve_everything(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approved": True})

    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, beta) as b, anyio.create_task_group() as group:
            ask = {"request_message": "Wire the money", "timeout_seconds": FOREVER}
            group.start_soon(structured, b, "mcp_request_admin_approval", ask)
            (request,) = await pending_requests(b)
            request_id = request["request_id"]
            async with stdio_as(env, "beta", mode, elicitation_callback=approve_everything) as claim:
                listed = await structured(claim, "mcp_list_pending_requests")
                waited = await structured(
                    claim, "mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 5}
                )
                mine = await structured(claim, "mcp_set_timer", TIMER)
            status = await structured(b, "mcp_get_request_status", {"request_id": request_id})
            group.cancel_scope.cancel()
    assert listed["requests"] == [] and waited["error_class"] == "hitl_request_not_found"
    assert asked == [] and status["status"] == "pending" and status["approved"] is False
    assert mine["agent"] == "stdio:beta"


async def test_operator_or_an_odd_name_is_only_ever_a_stdio_claim(baton_env: dict[str, str]) -> None:
    async with stdio_as(baton_env, "operator") as operator:
        claimed = await structured(operator, "mcp_set_timer", TIMER)
    async with stdio_as(baton_env, "ops bot\u202e:x") as odd:
        sanitized = await structured(odd, "mcp_set_timer", TIMER)
    assert claimed["agent"] == "stdio:operator" and sanitized["agent"] == "stdio:ops_bot__x"
    assert [p["agent"] for p in receipts(baton_env, "timer_set")] == ["stdio:operator", "stdio:ops_bot__x"]


async def test_baton_agent_name_names_the_agent_and_may_not_be_reserved_or_registered(
    baton_env: dict[str, str],
) -> None:
    async with stdio_as({**baton_env, "BATON_AGENT_NAME": "ops-bot"}, "beta") as named:
        set_timer = await structured(named, "mcp_set_timer", TIMER)
    assert set_timer["agent"] == "ops-bot"
    reserved = run_cli({**baton_env, "BATON_AGENT_NAME": "operator"}, "serve")
    assert reserved.returncode == 1 and "config_invalid" in reserved.stderr
    assert "BATON_AGENT_NAME" in reserved.stderr and reserved.stdout == ""
    add_agent(baton_env, "beta")
    async with stdio_as({**baton_env, "BATON_AGENT_NAME": "beta"}, "beta") as taken:
        refused = await structured(taken, "mcp_set_timer", TIMER)
    assert refused["error_class"] == "config_invalid" and "BATON_AGENT_NAME" in refused["error"]
