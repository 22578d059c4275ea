"""The human-in-the-loop tools through the official MCP client over stdio, as the campaign runner drives them."""

from __future__ import annotations

import functools
import random
import re
from typing import Any

import anyio
import pytest

from tests.cli_process import run_cli
from tests.conftest import call, stdio_session
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio


@pytest.fixture
def baton_env(baton_env: dict[str, str]) -> dict[str, str]:
    """These tests play the operator through MCP, so they opt in to MCP decisions."""
    return {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}


async def test_campaign_pattern_approval_in_flight_then_timeout_probe(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "HITL_TIMEOUT_SECONDS": "2", "BATON_HITL_PROGRESS_SECONDS": "0.2"}
    progress: list[tuple[float, float | None, str | None]] = []
    approval: dict[str, Any] = {}

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with stdio_session(env) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {
            "mcp_request_admin_approval",
            "mcp_request_admin_input",
            "mcp_list_pending_requests",
            "mcp_respond_to_request",
            "mcp_get_request_status",
            "mcp_wait_for_request",
        } <= tools

        async def ask() -> None:
            result = await session.call_tool(
                "mcp_request_admin_approval",
                {
                    "request_message": "Approve publishing the Experiment 4-4 result?",
                    "context": {"risk": "low", "artifact": "validation-only"},
                    "timeout_seconds": 3600,
                    "urgent": False,
                },
                progress_callback=on_progress,
            )
            approval.update(result.structured_content or {})

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            rows = await pending_requests(session)
            assert rows[0]["kind"] == "approval" and rows[0]["context"] == {
                "risk": "low",
                "artifact": "validation-only",
            }
            assert set(rows[0]) >= {
                "request_id",
                "kind",
                "message",
                "context",
                "urgent",
                "created_at",
                "expires_at",
            }
            with anyio.fail_after(300):  # progress keeps an idle-timeout client alive while the human thinks
                while len(progress) < 2:
                    await anyio.sleep(0.05)
            responded = await call(
                session,
                "mcp_respond_to_request",
                {"request_id": rows[0]["request_id"], "approved": True, "admin_notes": "Automated operator."},
            )
            assert responded["success"] is True and responded["status"] == "approved"
        assert approval["success"] is True, approval
        assert (
            approval["approved"] is True
            and approval["timeout"] is False
            and approval["decision"] == "approved"
        )
        assert (
            approval["request_id"] == rows[0]["request_id"]
            and approval["admin_notes"] == "Automated operator."
        )
        assert approval["responded_at"] and approval["waited_seconds"] >= 0
        assert progress[0][0] == 0 and "Waiting for a human decision" in (progress[0][2] or "")

        again = await call(
            session, "mcp_respond_to_request", {"request_id": rows[0]["request_id"], "approved": False}
        )
        assert again["success"] is False and again["error_class"] == "hitl_request_already_decided"

        timeout = await call(
            session,
            "mcp_request_admin_approval",
            {
                "request_message": "No operator will answer this timeout probe.",
                "context": {"probe": True},
                "timeout_seconds": 1,
            },
        )
        assert timeout["success"] is False and timeout["timeout"] is True and timeout["approved"] is False
        assert timeout["error_class"] == "hitl_timeout" and timeout["decision"] == "timeout"
        late = await call(
            session, "mcp_respond_to_request", {"request_id": timeout["request_id"], "approved": True}
        )
        assert late["error_class"] == "hitl_request_expired"

        unknown = await call(
            session, "mcp_respond_to_request", {"request_id": "hr_missing", "approved": True}
        )
        assert unknown["error_class"] == "hitl_request_not_found"
        bad = await call(session, "mcp_request_admin_approval", {"request_message": "x", "urgent": "yes"})
        assert bad["error_class"] == "invalid_arguments"


async def test_an_abandoned_call_resumes_by_id_and_gets_the_decision(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        # the client cuts its call once the request exists (a client-side timeout, without its race: a
        # read timeout can fire before the server has even created the request on a busy machine)
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: session.call_tool(
                    "mcp_request_admin_input",
                    {"question": "Which region?", "options": ["eu", "us"], "timeout_seconds": 3600},
                )
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            group.cancel_scope.cancel()
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        assert status["status"] == "pending" and status["decided"] is False
        short = await call(session, "mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 1})
        assert (
            short["success"] is False
            and short["error_class"] == "hitl_still_pending"
            and short["timeout"] is False
        )
        answered = await call(session, "mcp_respond_to_request", {"request_id": request_id, "response": "eu"})
        assert answered["success"] is True and answered["waiter_gone"] is True
        resumed = await call(
            session, "mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 30}
        )
        assert resumed["success"] is True and resumed["response"] == "eu" and resumed["timeout"] is False
        assert resumed["decision"] == "answered"


async def test_responders_in_two_processes_race_and_many_waiters_wake_across_processes(
    baton_env: dict[str, str],
) -> None:
    count = 20
    expected: dict[str, bool] = {}
    results: dict[str, dict[str, Any]] = {}
    async with stdio_session(baton_env) as agent, stdio_session(baton_env) as admin:

        async def ask(i: int) -> None:
            result = await call(
                agent, "mcp_request_admin_approval", {"request_message": f"r{i}", "timeout_seconds": 3600}
            )
            results[result["request_id"]] = result

        async with anyio.create_task_group() as group:
            for i in range(count):
                group.start_soon(ask, i)
            rows = await pending_requests(admin, count)
            expected = {row["request_id"]: random.choice([True, False]) for row in rows}
            first = rows[0]["request_id"]
            race: list[dict[str, Any]] = []

            async def respond(session: Any, approved: bool) -> None:
                race.append(
                    await call(session, "mcp_respond_to_request", {"request_id": first, "approved": approved})
                )

            async with anyio.create_task_group() as racers:
                racers.start_soon(respond, agent, expected[first])
                racers.start_soon(respond, admin, expected[first])
            assert sorted(r["success"] for r in race) == [False, True]
            assert [r["error_class"] for r in race if not r["success"]] == ["hitl_request_already_decided"]
            order = [rid for rid in expected if rid != first]
            random.shuffle(order)
            for request_id in order:
                await call(
                    admin,
                    "mcp_respond_to_request",
                    {"request_id": request_id, "approved": expected[request_id]},
                )
    assert set(results) == set(expected)
    for request_id, result in results.items():
        assert result["success"] is True and result["approved"] is expected[request_id], result


async def test_cli_approve_in_another_process_wakes_the_waiting_call(baton_env: dict[str, str]) -> None:
    result: dict[str, Any] = {}
    async with stdio_session(baton_env) as session:

        async def ask() -> None:
            result.update(
                await call(
                    session,
                    "mcp_request_admin_approval",
                    {"request_message": "Deploy?", "timeout_seconds": 3600},
                )
            )

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            request_id = (await pending_requests(session))[0]["request_id"]
            listed = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "list", "--json")
            assert request_id in listed.stdout
            done = await anyio.to_thread.run_sync(
                run_cli, baton_env, "hitl", "approve", request_id, "--notes", "from the shell"
            )
            assert done.returncode == 0, done.stderr
            with anyio.fail_after(300):
                while not result:
                    await anyio.sleep(0.05)
    assert (
        result["success"] is True and result["approved"] is True and result["admin_notes"] == "from the shell"
    )
    again = run_cli(baton_env, "hitl", "reject", request_id)
    assert again.returncode == 1 and "hitl_request_already_decided" in again.stderr


async def test_a_decision_that_is_not_a_json_boolean_never_approves(baton_env: dict[str, str]) -> None:
    """``approved`` is a strict boolean at the MCP edge: "yes", "true", 1 are refused, nothing is decided."""
    async with stdio_session(baton_env) as session, anyio.create_task_group() as group:

        async def ask() -> None:
            await call(
                session,
                "mcp_request_admin_approval",
                {"request_message": "Wire money?", "timeout_seconds": 3600},
            )

        group.start_soon(ask)
        request_id = (await pending_requests(session))[0]["request_id"]
        for malformed in ("yes", "true", 1, "1", "on"):
            refused = await call(
                session, "mcp_respond_to_request", {"request_id": request_id, "approved": malformed}
            )
            assert refused["success"] is False, (malformed, refused)
            assert refused["error_class"] == "invalid_arguments", (malformed, refused)
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        assert status["status"] == "pending" and status["decided"] is False and not status["approved"]
        await call(session, "mcp_respond_to_request", {"request_id": request_id, "approved": False})


async def test_a_cut_off_approval_call_names_its_request_where_the_description_says(
    baton_env: dict[str, str],
) -> None:
    """The tool description promises the request_id in the first progress notification and in the pending
    list; a cut call is resumed by that id and gets a decision made after the cut."""
    first = anyio.Event()
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        first.set()

    async with stdio_session(baton_env) as session:
        description = {tool.name: tool.description for tool in (await session.list_tools()).tools}
        assert "first progress notification" in (description["mcp_request_admin_approval"] or "")
        assert "mcp_list_pending_requests" in (description["mcp_request_admin_approval"] or "")
        async with anyio.create_task_group() as group:
            arguments = {"request_message": "Deploy?", "timeout_seconds": 3600}
            group.start_soon(
                functools.partial(
                    session.call_tool, "mcp_request_admin_approval", arguments, progress_callback=on_progress
                )
            )
            with anyio.fail_after(300):
                await first.wait()
            group.cancel_scope.cancel()  # the client cuts the call
        request_id = re.findall(r"hr_[0-9a-f]+", messages[0])[0]
        listed = [row["request_id"] for row in await pending_requests(session)]
        decided = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "approve", request_id)
        assert decided.returncode == 0, decided.stderr
        resumed = await call(session, "mcp_wait_for_request", {"request_id": request_id})
    assert request_id.startswith("hr_") and listed == [request_id]
    assert resumed["success"] is True and resumed["approved"] is True and resumed["request_id"] == request_id
