"""A governed adapter's approval-gated tool runs as an MCP task for a client that declares tasks."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.gateway.test_runtime_proxy import env, shared  # noqa: F401 -- the module-scoped live adapters
from tests.tasks_client import CreateTaskResult, TasksClient, task_request

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_an_approval_gated_call_becomes_a_task_and_an_ungated_one_does_not(env: dict[str, str]) -> None:  # noqa: F811
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    async with Client(params, extensions=[TasksClient()]) as client:
        echoed = await client.call_tool("demo__echo", {"text": "plain"})
        assert not echoed.is_error and echoed.content[0].text == "plain"  # type: ignore[union-attr]
        created = await client.session.call_tool(
            "demo__transfer", {"to": "bob", "amount": 5}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(300):
            while "statusMessage" not in (
                state := await task_request(client.session, "tasks/get", {"taskId": created.task_id})
            ):
                await anyio.sleep(0.05)
        request_id = state["statusMessage"].split("(", 1)[1].rstrip(").")
        decided: Any = await client.call_tool(
            "mcp_respond_to_request", {"request_id": request_id, "approved": True}
        )
        assert decided.structured_content["success"] is True
        with anyio.fail_after(300):
            while (done := await task_request(client.session, "tasks/get", {"taskId": created.task_id}))[
                "status"
            ] != "completed":
                await anyio.sleep(0.05)
    assert done["result"]["structuredContent"]["text"] == 'transferred {"amount": 5, "to": "bob"}'
    assert done["result"]["structuredContent"]["approval"]["request_id"] == request_id
