"""Tool names through the real server: an unknown or over-long name is the spec's JSON-RPC error -32602 in
both protocol eras, never a tool result; a 4 MB name reaches no receipt and no metric label; the argument
cap holds whatever the name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import call, server_parameters, stdio_session
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

HUGE_NAME = "x" * 4_000_000
TOKEN = "bearer-token-for-tool-names-0001"


def receipts(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every ``tool_call`` receipt, read with ``baton receipts list --json``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "baton",
            "receipts",
            "list",
            "--oldest",
            "--kind",
            "tool_call",
            "--limit",
            "10000",
            "--json",
        ],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


async def refusal(client: Any, name: str, arguments: dict[str, Any] | None = None) -> MCPError:
    """The MCPError a call to ``name`` raises (failing the test when it returns a result instead)."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool(name, arguments or {})
    return caught.value


async def test_an_unknown_tool_is_a_json_rpc_error_in_the_2025_era(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        unknown = await refusal(session, "mcp_no_such_tool")
        assert unknown.code == -32602
        assert unknown.data["error_class"] == "unknown_tool"
        too_long = await refusal(session, HUGE_NAME)
        assert too_long.code == -32602
        assert too_long.data == {"error_class": "tool_name_too_long", "limit_chars": 128}
        assert HUGE_NAME[:200] not in too_long.message
        assert (await call(session, "mcp_ping"))["success"] is True


async def test_an_unknown_tool_is_a_json_rpc_error_in_the_2026_era(baton_env: dict[str, str]) -> None:
    async with Client(server_parameters(baton_env)) as client:
        unknown = await refusal(client, "mcp_no_such_tool")
        assert (unknown.code, unknown.data["error_class"]) == (-32602, "unknown_tool")
        too_long = await refusal(client, "y" * 129)
        assert (too_long.code, too_long.data["error_class"]) == (-32602, "tool_name_too_long")
        at_the_cap = await refusal(client, "y" * 128)
        assert at_the_cap.data["error_class"] == "unknown_tool"


async def test_a_four_megabyte_name_reaches_no_receipt(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        await refusal(session, HUGE_NAME)
        await refusal(session, "probe_" + "z" * 100)
        assert (await call(session, "mcp_ping"))["success"] is True
    rows = receipts(baton_env)
    tools = [row["payload"]["tool"] for row in rows]
    assert tools == ["probe_" + "z" * 100, "mcp_ping"]  # the unknown call is receipted, bounded
    assert rows[0]["payload"]["error_class"] == "unknown_tool"
    assert max(len(json.dumps(row)) for row in rows) < 2000


async def test_the_argument_cap_holds_for_unknown_names_too(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_MAX_ARGUMENT_BYTES": "2000"}
    async with stdio_session(env) as session:
        for name in ("mcp_ping", "mcp_no_such_tool", "someadapter__tool"):
            refused = await call(session, name, {"message": "m" * 5000})
            assert refused["error_class"] == "argument_too_large", name
            assert refused["limit_bytes"] == 2000
        assert (await refusal(session, "mcp_no_such_tool", {"message": "m"})).code == -32602
    oversized = [row["payload"] for row in receipts(env)]
    assert [(p["tool"], p["error_class"], p["arguments_sha256"]) for p in oversized] == [
        ("mcp_ping", "argument_too_large", None),
        ("mcp_no_such_tool", "argument_too_large", None),
        ("someadapter__tool", "argument_too_large", None),
        ("mcp_no_such_tool", "unknown_tool", oversized[3]["arguments_sha256"]),
    ]


async def test_metric_labels_are_known_tools_plus_one_unknown(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    with http_server({**baton_env, "BATON_HTTP_TOKEN": TOKEN}, f"127.0.0.1:{port}", tmp_path):
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport) as client:
                known = {tool.name for tool in (await client.list_tools()).tools}
                for index in range(40):
                    await refusal(client, f"random_{index:03d}_" + "q" * 100)
                for name in ("adapter__tool", "a" * 129):
                    await refusal(client, name)
                assert (await client.call_tool("mcp_ping", {})).structured_content["success"] is True
            scraped = await http.get(f"http://127.0.0.1:{port}/metrics")
    assert scraped.status_code == 200
    assert "random_" not in scraped.text and "adapter__tool" not in scraped.text
    labels = {
        sample.labels["tool"]
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if "tool" in sample.labels
    }
    assert labels == {"mcp_ping", "unknown"} and labels <= known | {"unknown"}
    calls = {
        (sample.labels["tool"], sample.labels["error_class"]): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if sample.name == "baton_tool_calls_total"
    }
    assert calls[("unknown", "unknown_tool")] == 41  # the over-long name was not counted at all
    assert "baton_gateway_calls_total{" not in scraped.text
