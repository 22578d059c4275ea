"""The server over its real transports: stdio purity, both protocol eras, streamable HTTP and its token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from tests.conftest import server_parameters, stdio_session
from tests.raw_stdio import HANDSHAKE, raw_stdio
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio


def test_stdio_writes_nothing_but_json_rpc(model_env: dict[str, str]) -> None:
    requests = [
        *HANDSHAKE,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "mcp_list_subagents", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    ]
    with raw_stdio(model_env) as server:
        server.send(*requests)
        messages = server.read_until(1, 2, 3, 4)
        assert server.close() == 0
        assert server.read_rest() == b""
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    by_id = {m.get("id"): m for m in messages}
    assert by_id[1]["result"]["serverInfo"]["name"] == "baton"
    assert by_id[3]["result"]["structuredContent"]["success"] is True
    unknown = by_id[4]["error"]  # the spec's -32602 for an unknown tool, not a tool result
    assert unknown["code"] == -32602
    assert unknown["data"]["error_class"] == "unknown_tool"


async def test_the_2026_era_client_discovers_and_calls(baton_env: dict[str, str]) -> None:
    async with Client(server_parameters(baton_env)) as client:
        tools = await client.list_tools()
        assert "mcp_spawn_subagent" in {t.name for t in tools.tools}
        result = await client.call_tool("mcp_spawn_subagent", {"task": "x"})
        assert result.structured_content["error_class"] == "provider_not_configured"
        assert result.structured_content["missing"] == ["COLLAB_PROVIDER"]
        bad = await client.call_tool("mcp_spawn_subagent", {"task": 3, "surprise": True})
        assert bad.structured_content["error_class"] == "invalid_arguments"
        assert {p["field"] for p in bad.structured_content["problems"]} == {"task", "surprise"}


async def test_streamable_http_serves_mcp(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            result = await client.call_tool("mcp_list_subagents", {})
            assert result.structured_content == {
                "subagents": [],
                "count": 0,
                "truncated": False,
                "next_cursor": None,
                "skipped": [],
                "success": True,
            }


async def test_a_token_protects_the_http_endpoint(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    token = "bearer-token-for-tests-0001"
    with http_server({**baton_env, "BATON_HTTP_TOKEN": token}, f"127.0.0.1:{port}", tmp_path):
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"http://127.0.0.1:{port}/mcp", json={})
            assert refused.status_code == 401
            wrong = await http.post(
                f"http://127.0.0.1:{port}/mcp", json={}, headers={"Authorization": "Bearer wrong"}
            )
            assert wrong.status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=120) as http:
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport) as client:
                result = await client.call_tool("mcp_list_subagents", {})
                assert result.structured_content["success"] is True


def test_a_non_loopback_bind_without_a_token_is_refused(baton_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "baton", "serve", "--http", f"0.0.0.0:{free_port()}"],
        env=baton_env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert "http_bind_refused" in done.stderr.decode()
    assert done.stdout == b""


async def test_stateless_http_needs_no_session_affinity(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    with http_server({**baton_env, "BATON_HTTP_STATELESS": "true"}, f"127.0.0.1:{port}", tmp_path):
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"http://127.0.0.1:{port}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2025-11-25",
                },
            )
        assert response.status_code == 200, response.text
        assert "mcp-session-id" not in response.headers
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            result = await client.call_tool("mcp_list_subagents", {})
            assert result.structured_content["success"] is True


async def test_a_store_that_cannot_open_still_answers_initialize_and_says_why(
    baton_env: dict[str, str],
) -> None:
    env = {**baton_env, "BATON_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    async with stdio_session(env) as session:
        result = await session.call_tool("mcp_list_subagents", {})
        assert result.structured_content["error_class"] == "store_unavailable"
        assert result.structured_content["success"] is False


@pytest.mark.parametrize("list_tools", [False, True])
async def test_the_store_loads_after_the_handshake_without_any_further_request(
    baton_env: dict[str, str], list_tools: bool
) -> None:
    """The registry loads once the first tools/list is answered (from the cache), or on its own shortly
    after start, so background services run for a client that only connects."""
    home = Path(baton_env["BATON_HOME"])
    async with stdio_session(baton_env) as session:  # a first start writes the tool cache
        await session.list_tools()
    database = home / "baton.db"
    database.unlink()
    requests = [*HANDSHAKE, *([{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}] if list_tools else [])]
    with raw_stdio(baton_env) as server:
        server.send(*requests)
        answers = [server.receive() for _ in range(len(requests) - 1)]
        assert [answer["id"] for answer in answers] == [1, 2][: len(answers)]
        with anyio.fail_after(300):  # a hang guard, not a timing
            while not database.exists():
                await anyio.sleep(0.05)
        assert server.close() == 0
