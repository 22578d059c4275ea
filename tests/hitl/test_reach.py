"""Reaching a person from the default stdio setup: each waiting call says where and how to decide (progress
and log notifications, seen by the official client in both eras), the result and the record name the paths
used (``reached_via``), and a request that reached nobody says so at once instead of waiting unseen."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.testing.webhooks import WebhookReceiver
from tests.cli_process import run_cli
from tests.conftest import call, server_parameters, stdio_session
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio

ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
ASK = {"request_message": "Deploy the release?", "timeout_seconds": 3600}


@pytest.fixture
def baton_env(baton_env: dict[str, str]) -> dict[str, str]:
    """The suite's environment with the default kept: a request that reached nobody fails its call at once."""
    return {k: v for k, v in baton_env.items() if k != "BATON_HITL_UNREACHED"}


def structured(result: Any) -> dict[str, Any]:
    """A tool result's structured content (the text block carries the same JSON)."""
    if isinstance(result.structured_content, dict):
        return result.structured_content
    return dict(json.loads(result.content[0].text))


def approve(env: dict[str, str], request_id: str) -> None:
    """A person at the host approves by the CLI (the OS account of the real uid decides)."""
    decided = run_cli(env, "hitl", "approve", request_id)
    assert decided.returncode == 0, decided.stderr


@pytest.mark.parametrize("era", sorted(ERAS))
async def test_a_waiting_stdio_call_tells_the_client_where_and_how_to_decide(
    baton_env: dict[str, str], era: str
) -> None:
    progress: list[str] = []
    logged: list[str] = []
    first = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        first.set()

    async def on_log(params: Any) -> None:
        logged.append(str(params.data))

    options: dict[str, Any] = {"mode": ERAS[era], "logging_callback": on_log, "log_level": "info"}
    outcome: dict[str, Any] = {}
    async with Client(server_parameters(baton_env), **options) as client:

        async def ask() -> None:
            answer = await client.call_tool("mcp_request_admin_approval", ASK, progress_callback=on_progress)
            outcome.update(structured(answer))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            with anyio.fail_after(300):
                await first.wait()
            request_id = re.findall(r"hr_[0-9a-f]+", progress[0])[0]
            await anyio.to_thread.run_sync(approve, baton_env, request_id)
        status = structured(await client.call_tool("mcp_get_request_status", {"request_id": request_id}))
    how = f"run `baton hitl approve|reject {request_id}` in a terminal on the server's host"
    assert how in progress[0]
    assert any(how in line for line in logged), logged
    assert outcome["approved"] is True and outcome["reached_via"] == ["progress"]
    assert status["reached_via"] == ["progress"]


async def test_a_request_that_reached_nobody_says_so_at_once_and_a_person_can_still_decide_it(
    baton_env: dict[str, str],
) -> None:
    """No progress token, no elicitation, no channel, stderr a log file: the call ends at once, nothing is
    approved, the request waits for a person at the host, and the agent can wait for their decision."""
    async with stdio_session(baton_env) as session:
        refused = await call(session, "mcp_request_admin_approval", ASK)
        request_id = refused["request_id"]
        listed = [row["request_id"] for row in await pending_requests(session)]
        await anyio.to_thread.run_sync(approve, baton_env, request_id)
        resumed = await call(session, "mcp_wait_for_request", {"request_id": request_id})
    assert refused["success"] is False and refused["error_class"] == "hitl_unreachable"
    assert refused["reached_via"] == [] and refused["status"] == "pending"
    assert f"baton hitl approve|reject|answer {request_id}" in refused["error"]
    assert "notification channel" in refused["error"] and "baton serve --http" in refused["error"]
    assert listed == [request_id]
    assert resumed["approved"] is True and resumed["reached_via"] == []


async def test_an_operator_who_watches_the_list_can_choose_to_wait_anyway(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HITL_UNREACHED": "wait"}
    outcome: dict[str, Any] = {}
    async with stdio_session(env) as session:

        async def ask() -> None:
            outcome.update(await call(session, "mcp_request_admin_approval", ASK))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            with anyio.fail_after(300):
                while not (rows := await pending_requests(session)):
                    await anyio.sleep(0.05)
            await anyio.to_thread.run_sync(approve, env, rows[0]["request_id"])
    assert outcome["approved"] is True and outcome["reached_via"] == []


async def test_the_terminal_counts_only_when_stderr_is_one(baton_env: dict[str, str]) -> None:
    """``baton serve`` with its stderr on a terminal (a pty): the line reaches a person, so the call waits."""
    main, secondary = os.openpty()
    outcome: dict[str, Any] = {}
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=baton_env)
    with os.fdopen(secondary, "w") as terminal:
        async with stdio_client(params, errlog=terminal) as (read, write):
            from mcp import ClientSession

            async with ClientSession(read, write) as session:
                await session.initialize()

                async def ask() -> None:
                    outcome.update(await call(session, "mcp_request_admin_approval", ASK))

                async with anyio.create_task_group() as group:
                    group.start_soon(ask)
                    with anyio.fail_after(300):
                        while not (rows := await pending_requests(session)):
                            await anyio.sleep(0.05)
                    await anyio.to_thread.run_sync(approve, baton_env, rows[0]["request_id"])
    seen = os.read(main, 65536).decode(errors="replace")
    os.close(main)
    assert outcome["approved"] is True and outcome["reached_via"] == ["terminal"]
    assert f"decide: baton hitl show {rows[0]['request_id']}" in seen


async def test_a_console_address_and_a_channel_are_paths_and_a_channel_that_failed_is_dropped(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """``BATON_PUBLIC_URL`` (a console) and a webhook: both named at creation; the webhook refuses every
    delivery, so once it answered, ``notification`` leaves the record, and the result says what held."""
    with WebhookReceiver(status=500) as hook:
        env = {
            **baton_env,
            "BATON_PUBLIC_URL": "https://baton.example.test",
            "HITL_WEBHOOK_URL": hook.url("/hitl"),
            "BATON_WEBHOOK_ALLOW": "127.0.0.0/8",
            "BATON_NOTIFY_ATTEMPTS": "1",
        }
        progress: list[str] = []
        outcome: dict[str, Any] = {}

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        async with stdio_session(env) as session:

            async def ask() -> None:
                answer = await session.call_tool(
                    "mcp_request_admin_approval", ASK, progress_callback=on_progress
                )
                outcome.update(structured(answer))

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                with anyio.fail_after(300):
                    while not hook.requests or not await anyio.to_thread.run_sync(_announced, env):
                        await anyio.sleep(0.05)
                request_id = (await pending_requests(session))[0]["request_id"]
                await anyio.to_thread.run_sync(approve, env, request_id)
    assert outcome["reached_via"] == ["progress", "console"]
    assert f"open https://baton.example.test/inbox/requests/{request_id}" in progress[0]


def _announced(env: dict[str, str]) -> bool:
    """Whether the announcement's deliveries are recorded (its ``hitl_announced`` receipt)."""
    done = run_cli(env, "receipts", "list", "--kind", "hitl_announced", "--json")
    assert done.returncode == 0, done.stderr
    return bool(json.loads(done.stdout))
