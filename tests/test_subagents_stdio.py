"""Subagent tools driven through the official MCP client over stdio, backed by a loopback model."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from baton.testing import Behavior, FakeLLMServer
from tests.conftest import call, stdio_session
from tests.raw_stdio import HANDSHAKE, raw_stdio

pytestmark = pytest.mark.anyio

CANARY = "PRIVATE-MARKER-MUST-BE-FILTERED"
PARENT = {
    "customer": "Ada",
    "request": "Refund an item bought 3 days ago for SGD 80",
    "policy": "Refunds within 7 days and below SGD 100 may be approved",
    "irrelevant_history": ["weather chat", "shipping FAQ", "newsletter"],
    "private_note": CANARY,
}


async def test_campaign_subagent_calls_meet_the_reference_gates(
    model_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.when("taxonomy", Behavior(delay_seconds=30))
    async with stdio_session(model_env) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {
            "mcp_spawn_subagent",
            "mcp_send_message_to_subagent",
            "mcp_cancel_subagent",
            "mcp_get_subagent_status",
            "mcp_list_subagents",
        } <= set(tools)
        assert "task" in tools["mcp_spawn_subagent"].input_schema["properties"]

        minimal = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": "Decide whether the refund meets the supplied policy and explain.",
                "context_strategy": "minimal",
                "mode": "sync",
                "parent_context": PARENT,
                "role": "refund policy specialist",
                "minimal_slice": ["policy"],
            },
        )
        assert minimal["success"] is True, minimal
        assert minimal["context_strategy"] == "minimal"
        assert minimal["prep_tokens"] == 0
        assert "Refunds within 7 days" in minimal["prepared_context"]
        assert "Ada" not in minimal["prepared_context"]
        assert minimal["filtered_fields"] == ["private_note"]
        assert minimal["result"] and minimal["usage"]["total_tokens"] > 0

        generated = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": "Decide whether the refund meets the supplied policy and explain.",
                "context_strategy": "llm_generated",
                "mode": "sync",
                "parent_context": PARENT,
                "role": "refund policy specialist",
                "business_rules": "Keep customer, request, and policy. Exclude private_note and irrelevant history.",
            },
        )
        assert generated["success"] is True, generated
        assert generated["context_strategy"] == "llm_generated"
        assert generated["prep_tokens"] > 0
        assert CANARY not in generated["prepared_context"]

        message = await call(
            session,
            "mcp_send_message_to_subagent",
            {
                "subagent_id": minimal["subagent_id"],
                "message": "Additional fact: the item is unused. Re-evaluate using only supplied facts.",
            },
        )
        assert message["success"] is True, message
        assert message["turn"] == 2
        last_body = fake_llm.requests[-1].body
        roles = [m["role"] for m in last_body["messages"]]
        assert roles == ["system", "user", "assistant", "user"]
        assert "Decide whether the refund" in last_body["messages"][1]["content"]

        spawned = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": "Return a JSON summary of the number 17 and whether it is prime.",
                "context_strategy": "minimal",
                "mode": "async",
                "role": "math specialist",
            },
        )
        assert spawned["success"] is True and spawned["status"] == "running"
        status = None
        with anyio.fail_after(300):
            while status is None or status["status"] not in {"completed", "failed"}:
                status = await call(
                    session, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]}
                )
                await anyio.sleep(0.05)
        assert status["status"] == "completed", status
        assert status["turns"] == 1 and status["result"]

        slow = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": "Write a detailed taxonomy with one thousand entries.",
                "context_strategy": "minimal",
                "mode": "async",
                "role": "taxonomy specialist",
            },
        )
        with anyio.fail_after(300):
            while not any("taxonomy" in json.dumps(r.body) for r in fake_llm.requests):
                await anyio.sleep(0.02)
        cancelled = await call(session, "mcp_cancel_subagent", {"subagent_id": slow["subagent_id"]})
        assert cancelled["success"] is True and cancelled["status"] == "cancelled"
        assert cancelled["cancelled_in_flight_call"] is True
        after = await call(session, "mcp_get_subagent_status", {"subagent_id": slow["subagent_id"]})
        assert after["status"] == "cancelled"
        with anyio.fail_after(300):
            while not any(r.aborted for r in fake_llm.requests):
                await anyio.sleep(0.02)

        again = await call(session, "mcp_cancel_subagent", {"subagent_id": slow["subagent_id"]})
        assert again["success"] is False and again["error_class"] == "subagent_already_terminal"

    assert CANARY not in fake_llm.all_request_text()
    receipts = json.loads(Path(model_env["COLLAB_LLM_RECEIPT_PATH"]).read_text())
    assert len(receipts) == 5
    assert all(
        r["response"]["id"] and r["usage"]["total_tokens"] is not None and r["latency_seconds"] is not None
        for r in receipts
    )
    assert {r["purpose"] for r in receipts} == {"context_preparation", "subagent_turn"}


async def test_a_killed_server_leaves_no_subagent_running_forever(
    model_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = Behavior(delay_seconds=60)
    env = {**model_env, "BATON_AGENT_NAME": "worker"}  # one agent across both servers: it reads its own
    with raw_stdio(env) as server:
        server.send(
            *HANDSHAKE,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "mcp_spawn_subagent", "arguments": {"task": "long job", "mode": "async"}},
            },
        )
        replies = [server.receive() for _ in range(2)]
        subagent_id = replies[1]["result"]["structuredContent"]["subagent_id"]
        with anyio.fail_after(300):
            while not fake_llm.requests:
                await anyio.sleep(0.02)
        server.kill()

    async with stdio_session(env) as session:
        with anyio.fail_after(300):
            while (status := await call(session, "mcp_get_subagent_status", {"subagent_id": subagent_id}))[
                "status"
            ] == "running":
                await anyio.sleep(0.1)
    assert status["status"] == "failed"
    assert status["error_class"] == "interrupted_by_restart"


async def test_a_cancel_from_the_cli_in_another_process_stops_the_running_model_call(
    model_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    """`baton subagents cancel` only writes the store; the serving process notices and hangs up the call."""
    import subprocess
    import sys

    fake_llm.when("very long analysis", Behavior(delay_seconds=120))
    async with stdio_session(model_env) as session:
        spawned = await call(session, "mcp_spawn_subagent", {"task": "a very long analysis", "mode": "async"})
        subagent_id = spawned["subagent_id"]
        with anyio.fail_after(300):
            while not any("very long analysis" in json.dumps(r.body) for r in fake_llm.requests):
                await anyio.sleep(0.02)
        done = subprocess.run(
            [sys.executable, "-m", "baton", "subagents", "cancel", subagent_id],
            env=model_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with anyio.fail_after(300):  # the loopback model server saw the client hang up
            while not any(r.aborted for r in fake_llm.requests):
                await anyio.sleep(0.05)
        status = await call(session, "mcp_get_subagent_status", {"subagent_id": subagent_id})
    assert status["status"] == "cancelled" and status["error_class"] == "subagent_cancelled"


async def test_an_async_spawns_tool_call_receipt_follows_its_spawn_once_and_a_refused_one_is_receipted_once(
    model_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    from baton.evidence.canonical import canonical_json, sha256_hex
    from tests.cli_process import run_cli

    env = {**model_env, "BATON_SUBAGENT_MAX_CONCURRENT": "1", "BATON_AGENT_NAME": "spawner"}
    admitted = {"task": "the one that runs", "mode": "async"}
    refused = {"task": "one too many", "mode": "async"}
    fake_llm.hold()  # the first subagent stays running, so the second is past the limit
    try:
        async with stdio_session(env) as session:
            first = await call(session, "mcp_spawn_subagent", admitted)
            second = await call(session, "mcp_spawn_subagent", refused)
            fake_llm.release()
            with anyio.fail_after(300):
                while (await call(session, "mcp_get_subagent_status", {"subagent_id": first["subagent_id"]}))[
                    "status"
                ] != "completed":
                    await anyio.sleep(0.05)
    finally:
        fake_llm.release()
    assert first["success"] is True and first["status"] == "running"
    assert second["error_class"] == "subagent_concurrency_exceeded"

    listed = run_cli(env, "receipts", "list", "--oldest", "--limit", "1000", "--json")
    assert listed.returncode == 0, listed.stderr
    chain = json.loads(listed.stdout)
    spawns = [r for r in chain if r["kind"] == "tool_call" and r["payload"]["tool"] == "mcp_spawn_subagent"]
    [spawned] = [r for r in chain if r["kind"] == "subagent_spawned"]
    [model_call] = [r for r in chain if r["kind"] == "model_call"]
    assert [r["payload"]["success"] for r in spawns] == [True, False]
    ok, failed = spawns
    # the success receipt is the one right after the spawn's (one transaction), before the turn's model call
    assert spawned["seq"] + 1 == ok["seq"] < model_call["seq"]
    assert spawned["payload"]["subagent_id"] == first["subagent_id"]
    assert ok["payload"] == {
        "tool": "mcp_spawn_subagent",
        "agent": "spawner",
        "arguments_sha256": sha256_hex(canonical_json(admitted)),
        "success": True,
        "error_class": None,
        "duration_seconds": ok["payload"]["duration_seconds"],
    }
    assert ok["payload"]["duration_seconds"] >= 0
    assert failed["payload"]["error_class"] == "subagent_concurrency_exceeded"
    assert failed["payload"]["arguments_sha256"] == sha256_hex(canonical_json(refused))
    verified = run_cli(env, "receipts", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
