"""baton's own MCP resources are scoped as its tools are: through a real ``baton serve --http`` with two
agents' tokens, an agent lists and reads its own human request, and another agent's reads as unknown."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.servers import free_port, http_server
from tests.tasks_client import CreateTaskResult, TasksClient, task_request
from tests.test_agents import FOREVER, add_agent, http_client

pytestmark = pytest.mark.anyio


async def test_an_agent_reads_its_own_request_and_another_agents_reads_as_unknown(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    alice, bob = add_agent(baton_env, "alice"), add_agent(baton_env, "bob")
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice, extensions=[TasksClient()]) as a,
            http_client(port, bob, extensions=[TasksClient()]) as b,
        ):
            ask = {"request_message": "Ship it", "timeout_seconds": FOREVER}
            created = await a.session.call_tool("mcp_request_admin_approval", ask, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            with anyio.fail_after(60):  # the task creates its request in the background
                while True:
                    listed = [str(r.uri) for r in (await a.session.list_resources()).resources]
                    mine = [uri for uri in listed if uri.startswith("baton://requests/")]
                    if mine:
                        break
                    await anyio.sleep(0.02)
            read = await a.session.read_resource(mine[0])
            state = json.loads(read.contents[0].text)
            assert state["status"] == "pending" and state["message"] == "Ship it"
            theirs = [str(r.uri) for r in (await b.session.list_resources()).resources]
            assert mine[0] not in theirs and "baton://receipts/head" in theirs
            with pytest.raises(MCPError) as refused:
                await b.session.read_resource(mine[0])
            assert refused.value.error.code == -32602
            assert refused.value.error.data == {"uri": mine[0]}
            await task_request(a.session, "tasks/cancel", {"taskId": created.task_id})
