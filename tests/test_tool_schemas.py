"""Tools that describe themselves: output schemas that real results validate against, annotations, clean text.

Every built-in tool is called with realistic arguments against a real ``baton serve`` (the loopback model,
SMTP and webhook peers), and each result, success or failure, is validated with ``jsonschema`` against the
``outputSchema`` the server listed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import WebhookReceiver
from tests.conftest import server_parameters, stdio_session
from tests.notify_support import configured_env

pytestmark = pytest.mark.anyio


async def listed_tools(session: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in (await session.list_tools()).tools}


@asynccontextmanager
async def era_session(env: dict[str, str], era: str) -> AsyncIterator[Any]:
    """The official client in one era: ``ClientSession`` after the 2025-11-25 handshake, or ``mcp.Client``'s
    default (2026-07-28, ``server/discover``)."""
    if era == "2025-11-25":
        async with stdio_session(env) as session:
            yield session
    else:
        async with Client(server_parameters(env)) as client:
            assert client.protocol_version == era
            yield client


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_every_tools_real_results_validate_against_its_output_schema(
    model_env: dict[str, str], tmp_path: Path, era: str
) -> None:
    with SMTPReceiver() as smtp, WebhookReceiver() as web:
        env = {
            **model_env,
            **configured_env(smtp, web, Path(model_env["BATON_HOME"])),
            "BATON_HITL_ALLOW_MCP_DECISIONS": "1",
        }
        seen: dict[str, set[bool]] = {}
        async with era_session(env, era) as session:
            tools = await listed_tools(session)

            async def check(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await session.call_tool(name, arguments)
                content = result.structured_content
                assert isinstance(content, dict), result
                jsonschema.validate(content, tools[name].output_schema)
                assert result.is_error is (content["success"] is False)
                seen.setdefault(name, set()).add(content["success"])
                return content

            await check("mcp_ping", {"message": "hello"})
            spawned = await check(
                "mcp_spawn_subagent",
                {
                    "task": "Summarise the plan",
                    "context_strategy": "full",
                    "parent_context": {"plan": "ship"},
                },
            )
            sid = spawned["subagent_id"]
            await check("mcp_send_message_to_subagent", {"subagent_id": sid, "message": "And the risks?"})
            await check("mcp_get_subagent_status", {"subagent_id": sid})
            await check("mcp_list_subagents", {})
            queued = await check("mcp_spawn_subagent", {"task": "Background job", "mode": "async"})
            await check("mcp_cancel_subagent", {"subagent_id": queued["subagent_id"]})
            await check("mcp_cancel_subagent", {"subagent_id": "sa_missing"})
            await check("mcp_get_subagent_status", {"subagent_id": "sa_missing"})
            await check("mcp_send_email", {"to_email": "ops@example.org", "subject": "Hi", "body": "Text"})
            await check("mcp_send_telegram_message", {"message": "Hi"})
            await check("mcp_send_slack_message", {"message": "Hi"})
            await check("mcp_send_discord_message", {"message": "Hi"})
            await check("mcp_send_webhook", {"payload": {"event": "test"}})
            await check("mcp_send_webhook", {"payload": {"event": "test"}, "url": "ftp://nowhere"})
            await check("mcp_notification_channels", {})
            timer = await check(
                "mcp_set_timer", {"name": "remind", "delay_seconds": 3600, "action": {"kind": "record"}}
            )
            await check("mcp_list_timers", {})
            await check("mcp_cancel_timer", {"timer_id": timer["timer_id"]})
            await check("mcp_cancel_timer", {"timer_id": "tm_missing"})
            await check("mcp_list_adapters", {})
            await check("mcp_request_admin_approval", {"request_message": "Expire me", "timeout_seconds": 1})
            decided: dict[str, Any] = {}

            async def ask() -> None:
                decided.update(
                    await check("mcp_request_admin_input", {"question": "Colour?", "timeout_seconds": 3600})
                )

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                with anyio.fail_after(300):
                    while not (pending := await check("mcp_list_pending_requests", {}))["requests"]:
                        await anyio.sleep(0.05)
                request_id = pending["requests"][0]["request_id"]
                await check("mcp_respond_to_request", {"request_id": request_id, "response": "blue"})
            await check("mcp_respond_to_request", {"request_id": request_id, "response": "red"})
            await check("mcp_get_request_status", {"request_id": request_id})
            await check("mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 1})
            await check("mcp_get_request_status", {"request_id": "hr_missing"})
            await check("mcp_ping", {"unexpected": 1})
    assert set(seen) == set(tools), set(tools) - set(seen)
    assert any(False in outcomes for outcomes in seen.values())  # error shapes were validated too
    assert decided["response"] == "blue"


async def test_every_tool_has_a_title_annotations_and_clean_descriptions(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        tools = await listed_tools(session)
    for name, tool in tools.items():
        assert tool.title and tool.annotations is not None and tool.annotations.title == tool.title, name
        hints = tool.annotations
        assert None not in (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ), name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.description and "\n    " not in tool.description and "  " not in tool.description, name
        summary = tool.description.split("\n", 1)[0]
        assert summary.endswith(".") and len(summary) <= 120, (name, summary)
        for field, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{field} has no description"
    assert tools["mcp_ping"].annotations.read_only_hint is True
    assert tools["mcp_cancel_subagent"].annotations.destructive_hint is True
    assert tools["mcp_send_email"].annotations.open_world_hint is True


def schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema of a JSON Schema (properties, items, alternatives, definitions)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("items", "additionalProperties", "not"):
        yield from schema_nodes(schema.get(key))
    for key in ("properties", "$defs"):
        for sub in (schema.get(key) or {}).values():
            yield from schema_nodes(sub)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key) or []:
            yield from schema_nodes(sub)


async def test_tool_definitions_carry_no_python_names_and_every_result_shape_is_strict(
    baton_env: dict[str, str],
) -> None:
    async with stdio_session(baton_env) as session:
        listed = await session.list_tools()
    tools = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools]
    size = len(json.dumps({"tools": tools}, separators=(",", ":")).encode())
    assert size < 48_000, size  # 48,837 bytes before the trim, with looser output schemas (docs/tools.md)
    for tool in tools:
        for schema in (tool["inputSchema"], tool["outputSchema"]):
            for node in schema_nodes(schema):
                assert "title" not in node, (tool["name"], node)
                assert not str(node.get("description", "")).startswith(("Arguments of", "``")), tool["name"]
        success, error = tool["outputSchema"]["anyOf"][:-1], tool["outputSchema"]["anyOf"][-1]
        assert error["required"] == ["success", "error", "error_class"], tool["name"]
        for shape in success:
            objects = [node for node in schema_nodes(shape) if node.get("properties")]
            assert all(node.get("additionalProperties") is False for node in objects), tool["name"]
    get_status = next(tool for tool in tools if tool["name"] == "mcp_get_request_status")
    assert {"decided_via", "waiter_gone"} <= set(get_status["outputSchema"]["anyOf"][0]["required"])
