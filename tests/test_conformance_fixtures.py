"""The conformance fixture profile and what the suite found in baton, through a real ``baton serve --http``
on 127.0.0.1 spoken to in raw 2026-07-28 JSON-RPC (each request its own envelope, as the suite sends it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from tests.cli_process import run_cli
from tests.conftest import server_parameters, stdio_session
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


def rpc(
    url: str, method: str, params: dict[str, Any], *, tasks: bool = False, name: str | None = None
) -> httpx.Response:
    """One request with the per-request envelope and the routing headers a 2026-07-28 client sends."""
    capabilities: dict[str, Any] = {"elicitation": {}, **({"extensions": {TASKS: {}}} if tasks else {})}
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    named = name if name is not None else params.get("name") or params.get("taskId") or params.get("uri")
    if named is not None:
        headers["Mcp-Name"] = str(named)
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response, whether it came as JSON or as the last message of an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(line) for line in lines if line]
        found: dict[str, Any] = next(m for m in reversed(messages) if "id" in m)
        return found
    parsed: dict[str, Any] = response.json()
    return parsed


def result(url: str, method: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """The result of a request that must succeed."""
    reply = answer(rpc(url, method, params, **kwargs))
    assert "result" in reply, reply
    found: dict[str, Any] = reply["result"]
    return found


async def task_state(url: str, task_id: str, status: str) -> dict[str, Any]:
    """``tasks/get`` until the task reaches ``status`` (the task's own progress, no time margin)."""
    with anyio.fail_after(60):
        while True:
            state = result(url, "tasks/get", {"taskId": task_id}, tasks=True)
            if state["status"] == status:
                return state
            assert state["status"] in ("working", "input_required"), state
            await anyio.sleep(0.02)


@pytest.fixture
def fixtures_url(baton_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``baton serve --http`` on loopback with the conformance fixtures on."""
    env = {**baton_env, "BATON_CONFORMANCE_FIXTURES": "1"}
    bind = f"127.0.0.1:{free_port()}"
    with http_server(env, bind, tmp_path):
        yield f"http://{bind}/mcp"


@pytest.fixture
def plain_url(baton_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``baton serve --http`` on loopback as shipped (no fixtures)."""
    bind = f"127.0.0.1:{free_port()}"
    with http_server(baton_env, bind, tmp_path):
        yield f"http://{bind}/mcp"


async def test_a_partial_tasks_update_leaves_only_the_unanswered_input_pending(fixtures_url: str) -> None:
    created = result(fixtures_url, "tools/call", {"name": "multi_input", "arguments": {}}, tasks=True)
    assert created["resultType"] == "task"
    waiting = await task_state(fixtures_url, created["taskId"], "input_required")
    assert set(waiting["inputRequests"]) == {"name", "confirm"}
    first = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    ack = result(
        fixtures_url, "tasks/update", {"taskId": created["taskId"], "inputResponses": first}, tasks=True
    )
    assert ack["resultType"] == "complete" and "status" not in ack
    after = result(fixtures_url, "tasks/get", {"taskId": created["taskId"]}, tasks=True)
    assert after["status"] == "input_required"
    assert set(after["inputRequests"]) == {"confirm"}
    second = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    result(fixtures_url, "tasks/update", {"taskId": created["taskId"], "inputResponses": second}, tasks=True)
    done = await task_state(fixtures_url, created["taskId"], "completed")
    assert "Ada" in done["result"]["content"][0]["text"]


async def test_tasks_get_naming_another_task_in_mcp_name_is_refused_with_32020(fixtures_url: str) -> None:
    created = result(
        fixtures_url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, tasks=True
    )
    refused = rpc(fixtures_url, "tasks/get", {"taskId": created["taskId"]}, tasks=True, name="task_another")
    assert refused.status_code == 400
    assert answer(refused)["error"]["code"] == -32020
    matching = result(fixtures_url, "tasks/get", {"taskId": created["taskId"]}, tasks=True)
    assert matching["taskId"] == created["taskId"]


def test_a_required_task_tool_refuses_a_client_that_did_not_declare_tasks(fixtures_url: str) -> None:
    refused = rpc(fixtures_url, "tools/call", {"name": "failing_job", "arguments": {}})
    assert refused.status_code == 400
    error = answer(refused)["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}


async def test_a_protocol_error_fails_its_task_with_the_error_and_no_result(fixtures_url: str) -> None:
    created = result(fixtures_url, "tools/call", {"name": "protocol_error_job", "arguments": {}}, tasks=True)
    state = await task_state(fixtures_url, created["taskId"], "failed")
    assert state["error"]["code"] == -32603
    assert "result" not in state


def test_a_tampered_request_state_is_refused_by_batons_own_boundary(fixtures_url: str) -> None:
    name = "test_input_required_result_tampered_state"
    first = result(fixtures_url, "tools/call", {"name": name, "arguments": {}})
    assert first["resultType"] == "input_required"
    state = first["requestState"]
    tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
    confirm = {"confirm": {"action": "accept", "content": {"ok": True}}}
    retry = {"name": name, "arguments": {}, "inputResponses": confirm, "requestState": tampered}
    assert answer(rpc(fixtures_url, "tools/call", retry))["error"]["code"] == -32602
    honest = result(fixtures_url, "tools/call", {**retry, "requestState": state})
    assert honest["content"][0]["text"] == "integrity-ok: state verified"


def test_without_fixtures_prompts_and_resources_are_baton_own_and_valid(plain_url: str) -> None:
    assert result(plain_url, "prompts/list", {})["prompts"] == []
    tools = {tool["name"] for tool in result(plain_url, "tools/list", {})["tools"]}
    assert "test_simple_text" not in tools
    listed = {resource["uri"] for resource in result(plain_url, "resources/list", {})["resources"]}
    assert "baton://receipts/head" in listed
    templates = result(plain_url, "resources/templates/list", {})["resourceTemplates"]
    assert [template["uriTemplate"] for template in templates] == ["baton://requests/{request_id}"]
    head = result(plain_url, "resources/read", {"uri": "baton://receipts/head"})
    assert json.loads(head["contents"][0]["text"])["seq"] >= 0
    missing = answer(rpc(plain_url, "resources/read", {"uri": "baton://requests/req_nobody"}))["error"]
    assert missing["code"] == -32602
    assert missing["data"] == {"uri": "baton://requests/req_nobody"}


def test_serve_refuses_the_fixtures_beyond_loopback(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": "a-strong-agent-token-" + "x" * 32}
    done = run_cli(env, "serve", "--http", f"0.0.0.0:{free_port()}", "--conformance-fixtures")
    assert done.returncode == 1
    assert done.stderr.startswith("config_invalid:"), done.stderr
    assert "BATON_CONFORMANCE_FIXTURES" in done.stderr
    assert env["BATON_HTTP_TOKEN"] not in done.stderr


def test_doctor_says_when_the_fixtures_are_on(baton_env: dict[str, str]) -> None:
    off = json.loads(run_cli(baton_env, "doctor", "--json").stdout)
    on = json.loads(run_cli({**baton_env, "BATON_CONFORMANCE_FIXTURES": "1"}, "doctor", "--json").stdout)
    assert "conformance fixtures" not in {check["name"] for check in off}
    assert "conformance fixtures" in {check["name"] for check in on}


async def test_over_stdio_the_fixtures_are_listed_even_when_a_tool_cache_exists(
    baton_env: dict[str, str],
) -> None:
    from baton.wire.tool_cache import cache_path

    async with stdio_session(baton_env) as session:
        await session.call_tool("mcp_ping", {})
    assert cache_path(Path(baton_env["BATON_HOME"])).exists()
    flagged = server_parameters(baton_env, "--conformance-fixtures")  # the flag, not the variable
    async with stdio_client(flagged) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert {"test_simple_text", "slow_compute", "confirm_delete"} <= listed
        called = await session.call_tool("test_simple_text", {})
        assert called.content[0].text == "This is a simple text response for testing."
        prompts = {prompt.name for prompt in (await session.list_prompts()).prompts}
        assert "test_simple_prompt" in prompts
