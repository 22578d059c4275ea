"""Bounded inputs over a real stdio server: oversized arguments are refused at once, lists stay small and
paged, and tool arguments are strictly typed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli_process import run_cli
from tests.conftest import call, stdio_session
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio

MEGABYTE = "x" * (1024 * 1024)


async def test_oversized_free_form_arguments_are_refused_naming_the_field(baton_env: dict[str, str]) -> None:
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mcp_request_admin_approval", {"request_message": "ok?", "context": {"blob": MEGABYTE}}, "context"),
        ("mcp_request_admin_input", {"question": "q", "options": [MEGABYTE]}, "options"),
        ("mcp_spawn_subagent", {"task": MEGABYTE}, "task"),
        ("mcp_spawn_subagent", {"task": "t", "parent_context": {"a": [MEGABYTE]}}, "parent_context"),
        ("mcp_spawn_subagent", {"task": "t", "business_rules": MEGABYTE}, "business_rules"),
        ("mcp_send_message_to_subagent", {"subagent_id": "s", "message": MEGABYTE}, "message"),
        ("mcp_send_webhook", {"payload": {"deep": {"er": MEGABYTE}}}, "payload"),
        ("mcp_send_email", {"to_email": "a@example.org", "subject": "s", "body": MEGABYTE}, "body"),
        (
            "mcp_set_timer",
            {"name": "n", "delay_seconds": 60, "action": {"kind": "record", "x": MEGABYTE}},
            "action",
        ),
        (
            "mcp_respond_to_request",
            {"request_id": "r", "approved": True, "admin_notes": MEGABYTE},
            "admin_notes",
        ),
    ]
    async with stdio_session(baton_env) as session:
        for tool, arguments, field in cases:
            result = await call(session, tool, arguments)
            assert result["error_class"] == "argument_too_large", (tool, result)
            assert result["field"] == field
            assert result["limit_bytes"] == 256 * 1024
        assert (await call(session, "mcp_list_pending_requests"))["requests"] == []
        assert (await call(session, "mcp_ping"))["success"] is True


async def test_the_argument_cap_is_configurable(baton_env: dict[str, str]) -> None:
    async with stdio_session({**baton_env, "BATON_MAX_ARGUMENT_BYTES": "2000"}) as session:
        refused = await call(session, "mcp_ping", {"message": "y" * 999 + "é" * 1000})
        assert refused["error_class"] == "argument_too_large" and refused["limit_bytes"] == 2000
        fine = await call(session, "mcp_ping", {"message": "y" * 900})
        assert fine["success"] is True


async def test_large_contexts_are_left_out_of_the_pending_list(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    big = {"rows": ["r" * 1000 for _ in range(100)]}  # about 100 KB: under the cap, over the list's share
    async with stdio_session(env) as session, anyio.create_task_group() as group:
        for context in (big, {"small": True}):
            group.start_soon(
                call,
                session,
                "mcp_request_admin_approval",
                {"request_message": "deploy?", "context": context, "timeout_seconds": 3600},
            )
        rows = await pending_requests(session, 2)
        by_size = {bool(row["context_truncated"]): row for row in rows}
        assert by_size[True]["context"] is None
        assert by_size[False]["context"] == {"small": True}
        full = await call(session, "mcp_get_request_status", {"request_id": by_size[True]["request_id"]})
        assert full["context"] == big
        assert (await call(session, "mcp_ping"))["success"] is True
        for row in rows:
            await call(
                session, "mcp_respond_to_request", {"request_id": row["request_id"], "approved": False}
            )


def _seed_subagents(env: dict[str, str], count: int) -> None:
    from sqlalchemy import insert

    from baton.config import load_settings
    from baton.runtime import Runtime
    from baton.store.schema import subagents

    runtime = Runtime.open(load_settings(env))
    try:
        with runtime.store.write() as connection:
            connection.execute(
                insert(subagents),
                [
                    {
                        "id": f"sa_{n:04d}",
                        "role": "assistant",
                        "task": f"task {n}",
                        "mode": "async",
                        "context_strategy": "minimal",
                        "prepared_context": "",
                        "filtered_fields": [],
                        "status": "completed",
                        "agent": "stdio:mcp",  # the official client's clientInfo.name, as a claim: the stdio agent
                        "input_tokens": 0,
                        "output_tokens": 0,
                        "prep_tokens": 0,
                        "created_at": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000000+00:00",
                        "updated_at": "2026-01-01T00:00:00.000000+00:00",
                    }
                    for n in range(count)
                ],
            )
    finally:
        runtime.close()


async def test_list_subagents_pages_and_says_when_truncated(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:  # creates the store and its schema
        assert (await call(session, "mcp_list_subagents"))["count"] == 0
    _seed_subagents(baton_env, 230)
    async with stdio_session(baton_env) as session:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            arguments: dict[str, Any] = {"limit": 200}
            if cursor:
                arguments["cursor"] = cursor
            page = await call(session, "mcp_list_subagents", arguments)
            pages += 1
            seen += [row["subagent_id"] for row in page["subagents"]]
            if not page["truncated"]:
                assert page["next_cursor"] is None
                break
            cursor = page["next_cursor"]
        assert pages == 2
        assert seen == [f"sa_{n:04d}" for n in reversed(range(230))]
        default = await call(session, "mcp_list_subagents")
        assert default["count"] == 50 and default["truncated"] is True
        # a status filter with a cursor (the page read on the event loop): the same order, nothing else
        first = await call(session, "mcp_list_subagents", {"status": "completed", "limit": 10})
        second = await call(
            session,
            "mcp_list_subagents",
            {"status": "completed", "limit": 10, "cursor": first["next_cursor"]},
        )
        listed = [row["subagent_id"] for row in first["subagents"] + second["subagents"]]
        assert listed == [f"sa_{n:04d}" for n in reversed(range(210, 230))]
        assert (await call(session, "mcp_list_subagents", {"status": "running"}))["count"] == 0
        assert (await call(session, "mcp_list_subagents", {"limit": 201}))[
            "error_class"
        ] == "invalid_arguments"
        bad = await call(session, "mcp_list_subagents", {"cursor": "not-a-cursor"})
        assert bad["error_class"] == "invalid_arguments"


async def test_tool_arguments_are_strictly_typed(baton_env: dict[str, str], tmp_path: Path) -> None:
    async with stdio_session(baton_env) as session:
        for timeout in ("30", True, 30.5):
            result = await call(
                session, "mcp_request_admin_approval", {"request_message": "x", "timeout_seconds": timeout}
            )
            assert result["error_class"] == "invalid_arguments", timeout
            assert [p["field"] for p in result["problems"]] == ["timeout_seconds"]
        for urgent in (1, "true"):
            result = await call(session, "mcp_request_admin_input", {"question": "x", "urgent": urgent})
            assert result["error_class"] == "invalid_arguments", urgent
        result = await call(session, "mcp_list_subagents", {"limit": "5"})
        assert result["error_class"] == "invalid_arguments"
        timer = await call(
            session, "mcp_set_timer", {"name": "n", "delay_seconds": 600, "action": {"kind": "record"}}
        )
        assert timer["success"] is True, timer  # an integer is still a number of seconds
        assert (await call(session, "mcp_list_pending_requests"))["requests"] == []


async def test_short_fields_have_their_own_limits(baton_env: dict[str, str]) -> None:
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mcp_request_admin_input", {"question": "q", "options": [str(n) for n in range(101)]}, "options"),
        ("mcp_request_admin_input", {"question": "q", "options": ["o" * 1001]}, "options.0"),
        ("mcp_get_subagent_status", {"subagent_id": "s" * 65}, "subagent_id"),
        ("mcp_spawn_subagent", {"task": "t", "minimal_slice": ["a"] * 201}, "minimal_slice"),
        ("mcp_cancel_timer", {"timer_id": "t" * 65}, "timer_id"),
        ("mcp_send_webhook", {"payload": {}, "url": "http://x/" + "p" * 2048}, "url"),
    ]
    async with stdio_session(baton_env) as session:
        for tool, arguments, field in cases:
            result = await call(session, tool, arguments)
            assert result["error_class"] == "invalid_arguments", (tool, result)
            assert [p["field"] for p in result["problems"]] == [field]


async def test_an_oversized_call_to_an_unknown_tool_never_succeeds_nor_stores_its_arguments(
    baton_env: dict[str, str],
) -> None:
    """The cap holds whatever the name: an unknown tool (or an unknown gateway tool) called with a megabyte
    is refused, whether as a tool error or a JSON-RPC error; nothing that large reaches a receipt, and a
    receipt of the call says the arguments were too large (not hashed, as for a known tool)."""
    from mcp.shared.exceptions import MCPError

    names = ["mcp_no_such_tool", "nowhere__tool", "unknown"]
    async with stdio_session(baton_env) as session:
        for name in names:
            try:
                result = await session.call_tool(name, arguments={"blob": MEGABYTE})
            except MCPError as refused:  # a protocol error is a refusal too
                message = str(refused)
            else:
                message = ""
            assert MEGABYTE[:1000] not in message
            if message:
                continue
            assert result.is_error or not (result.structured_content or {}).get("success"), result
            assert MEGABYTE[:1000] not in str(result.content)
        assert (await call(session, "mcp_ping"))["success"] is True
    listed = run_cli(baton_env, "receipts", "list", "--oldest", "--limit", "10000", "--json")
    assert listed.returncode == 0, listed.stderr
    receipts = json.loads(listed.stdout)
    assert receipts, "the calls left no receipt at all"
    assert all(len(json.dumps(r)) < 256 * 1024 for r in receipts)
    assert len(listed.stdout) < 256 * 1024
    assert "x" * 10_000 not in listed.stdout
    calls = [r["payload"] for r in receipts if r["kind"] == "tool_call" and r["payload"]["tool"] in names]
    for receipt in calls:
        assert receipt["success"] is False, receipt
        assert receipt["error_class"] == "argument_too_large" and receipt["arguments_sha256"] is None, receipt
    verified = run_cli(baton_env, "receipts", "verify")
    assert verified.returncode == 0, verified.stderr
