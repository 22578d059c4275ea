"""``waiter_gone`` for every way a waiting call can end over HTTP, as docs/hitl.md states it.

Raw streamable HTTP (2025-11-25) against a real ``baton serve --http``, so each ending is exactly one thing:
a dropped SSE stream of a stateful session (the call goes on: the spec says a disconnection is not a
cancellation), a session DELETE, a dropped stream on stateless HTTP (the request's transport ends with
it), and ``notifications/cancelled``. The stdio cases (a client's timeout cancelling the call, a killed
server) are in test_tools_stdio.py and test_restart.py; a cancelled task in tests/test_tasks.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import select

from baton.runtime import Runtime
from baton.store.schema import hitl_requests
from tests.cli_process import run_cli
from tests.hitl.helpers import HttpServer
from tests.raw_stdio import HANDSHAKE

pytestmark = pytest.mark.anyio

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "mcp_request_admin_approval",
        "arguments": {"request_message": "Still there?", "timeout_seconds": 120},
        "_meta": {"progressToken": "p"},
    },
}


def waiter(runtime: Runtime) -> tuple[str, str | None]:
    with runtime.store.read() as connection:
        row = connection.execute(select(hitl_requests.c.id, hitl_requests.c.waiter_instance)).one()
    return row.id, row.waiter_instance


async def open_session(http: httpx.AsyncClient) -> dict[str, str]:
    """Initialize; the headers of the session (with its id when the server is stateful)."""
    answer = await http.post("/mcp", headers=HEADERS, json=HANDSHAKE[0])
    session_id = answer.headers.get("mcp-session-id")
    headers = {**HEADERS, **({"mcp-session-id": session_id} if session_id else {})}
    await http.post("/mcp", headers=headers, json=HANDSHAKE[1])
    return headers


async def start_call_then_drop(http: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """Send the call, read until its first progress notification, then close the stream."""
    async with http.stream("POST", "/mcp", headers=headers, json=CALL) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("method") == "notifications/progress":
                return


async def until_waiter_left(runtime: Runtime) -> str:
    with anyio.fail_after(300):
        while (state := waiter(runtime))[1] is not None:
            await anyio.sleep(0.05)
    return state[0]


def decided_waiter_gone(env: dict[str, str], runtime: Runtime, request_id: str) -> bool:
    done = run_cli(env, "hitl", "approve", request_id)
    assert done.returncode == 0, done.stderr
    with runtime.store.read() as connection:
        row = connection.execute(select(hitl_requests).where(hitl_requests.c.id == request_id)).one()
    assert row.status == "approved"
    return bool(row.waiter_gone)


async def tool_call_receipts(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = await anyio.to_thread.run_sync(
        run_cli, env, "receipts", "list", "--oldest", "--kind", "tool_call", "--json"
    )
    return [r for r in json.loads(listed.stdout) if r["payload"]["tool"] == "mcp_request_admin_approval"]


@pytest.fixture
def server(baton_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    env = {**baton_env, "BATON_HITL_PROGRESS_SECONDS": "0.2", "BATON_HTTP_STATELESS": request.param}
    started = HttpServer(env, tmp_path / "http.log")
    yield env, started
    started.stop()


@pytest.mark.parametrize("server", ["false"], indirect=True)
async def test_a_dropped_stream_of_a_stateful_session_is_not_a_cancel_the_call_still_waits(
    server: Any, runtime: Runtime
) -> None:
    env, http_server = server
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=10) as http:
        await start_call_then_drop(http, await open_session(http))
    request_id, instance = waiter(runtime)
    assert instance is not None
    assert await anyio.to_thread.run_sync(decided_waiter_gone, env, runtime, request_id) is False
    with anyio.fail_after(300):  # the still-running call finishes (its answer has no stream to go to)
        while not await tool_call_receipts(env):
            await anyio.sleep(0.1)


@pytest.mark.parametrize("server", ["false"], indirect=True)
async def test_a_session_delete_ends_the_wait(server: Any, runtime: Runtime) -> None:
    env, http_server = server
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=10) as http:
        headers = await open_session(http)
        await start_call_then_drop(http, headers)
        assert (await http.delete("/mcp", headers=headers)).status_code == 200
    request_id = await until_waiter_left(runtime)
    assert await anyio.to_thread.run_sync(decided_waiter_gone, env, runtime, request_id) is True


@pytest.mark.parametrize("server", ["true"], indirect=True)
async def test_on_stateless_http_a_dropped_stream_ends_the_wait(server: Any, runtime: Runtime) -> None:
    env, http_server = server
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=10) as http:
        await start_call_then_drop(http, await open_session(http))
    request_id = await until_waiter_left(runtime)
    assert await anyio.to_thread.run_sync(decided_waiter_gone, env, runtime, request_id) is True


@pytest.mark.parametrize("server", ["false"], indirect=True)
async def test_notifications_cancelled_ends_the_wait(server: Any, runtime: Runtime) -> None:
    env, http_server = server
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=10) as http:
        headers = await open_session(http)
        async with anyio.create_task_group() as group:
            group.start_soon(start_call_then_drop, http, headers)
            with anyio.fail_after(300):
                while waiter_or_none(runtime) is None:
                    await anyio.sleep(0.05)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            await http.post("/mcp", headers=headers, json=cancel)
    request_id = await until_waiter_left(runtime)
    assert await anyio.to_thread.run_sync(decided_waiter_gone, env, runtime, request_id) is True


def waiter_or_none(runtime: Runtime) -> str | None:
    with runtime.store.read() as connection:
        row = connection.execute(select(hitl_requests.c.waiter_instance)).first()
    return None if row is None else row.waiter_instance
