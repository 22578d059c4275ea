"""Who may decide: by default a person (inbox, CLI, elicitation), never the agent that asked over MCP.

Each test runs the self-approval sequence of an agent (ask, list, respond) against a real
``baton serve`` process, over stdio or streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.cli_process import run_cli
from tests.conftest import call, stdio_session
from tests.hitl.helpers import pending_requests
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

AGENT_TOKEN = "agent-token-for-tests-0123456789"
ADMIN_TOKEN = "admin-token-for-tests-9876543210"
#: The OS account this test runs as: the one person `baton hitl approve` decides as, whatever LOGNAME says.
ME = pwd.getpwuid(os.getuid()).pw_name


async def self_approval(
    session: Any, decide: Callable[[str], Awaitable[dict[str, Any]]], env: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Ask for an approval, list it, let ``decide`` answer it; returns (decision answer, asker's result, id).

    The request waits an hour, so no test depends on how fast a loaded machine gets through the steps:
    when ``decide`` leaves it pending, a person rejects it with the CLI in another process, which ends the
    asker's call (a refused MCP decision must not have approved it)."""
    asked: dict[str, Any] = {}

    async def ask() -> None:
        asked.update(
            await call(
                session,
                "mcp_request_admin_approval",
                {"request_message": "delete prod db", "timeout_seconds": 3600},
            )
        )

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        request_id = (await pending_requests(session))[0]["request_id"]
        answer = await decide(request_id)
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        if status["status"] == "pending":
            done = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
            assert done.returncode == 0, done.stderr
    return answer, asked, request_id


async def test_the_agent_cannot_approve_its_own_request_over_stdio(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:

        async def respond(request_id: str) -> dict[str, Any]:
            answer = await call(
                session, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
            )
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and status["decided"] is False
            return answer

        answer, asked, _ = await self_approval(session, respond, baton_env)
    assert answer["success"] is False
    assert answer["error_class"] == "hitl_decider_not_authorized"
    # the agent is told that a person decides, and where; never which setting would let it decide
    assert "BATON_" not in answer["error"] and "baton hitl approve|reject|answer" in answer["error"]
    assert asked["approved"] is False and asked["decision"] == "rejected"
    status = json.loads(
        run_cli(baton_env, "receipts", "list", "--oldest", "--kind", "hitl_decided", "--json").stdout
    )
    assert [r["payload"]["via"] for r in status] == ["cli"]  # the refused MCP answer decided nothing


async def test_a_person_still_decides_through_the_cli_while_the_agent_is_refused(
    baton_env: dict[str, str],
) -> None:
    async with stdio_session(baton_env) as session:

        async def person(request_id: str) -> dict[str, Any]:
            refused = await call(
                session, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
            )
            assert refused["error_class"] == "hitl_decider_not_authorized"
            done = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "reject", request_id)
            assert done.returncode == 0, done.stderr
            return refused

        _, asked, _ = await self_approval(session, person, baton_env)
    assert asked["success"] is True and asked["approved"] is False and asked["decision"] == "rejected"


async def test_input_requests_cannot_be_answered_by_the_agent_either(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        answered: dict[str, Any] = {}

        async def ask() -> None:
            answered.update(
                await call(
                    session, "mcp_request_admin_input", {"question": "Which region?", "timeout_seconds": 3600}
                )
            )

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            request_id = (await pending_requests(session))[0]["request_id"]
            refused = await call(
                session, "mcp_respond_to_request", {"request_id": request_id, "response": "eu"}
            )
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and status["response"] is None
            declined = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "reject", request_id)
            assert declined.returncode == 0, declined.stderr
    assert refused["error_class"] == "hitl_decider_not_authorized"
    assert answered["response"] is None and answered["decision"] == "rejected", answered


async def test_the_opt_in_lets_mcp_clients_decide_and_is_receipted_as_mcp(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    async with stdio_session(env) as session:

        async def respond(request_id: str) -> dict[str, Any]:
            return await call(session, "mcp_respond_to_request", {"request_id": request_id, "approved": True})

        answer, asked, _ = await self_approval(session, respond, baton_env)
    assert answer["success"] is True and answer["decided_via"] == "mcp"
    assert asked["success"] is True and asked["approved"] is True


@asynccontextmanager
async def http_client(port: int, token: str | None) -> AsyncIterator[Client]:
    """The official client over streamable HTTP, sending ``token`` as its bearer credential."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_over_http_the_agents_token_may_not_decide_but_the_admin_token_may(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, AGENT_TOKEN) as agent, http_client(port, ADMIN_TOKEN) as admin:

            async def decide(request_id: str) -> dict[str, Any]:
                refused = await structured(
                    agent, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
                )
                assert refused["error_class"] == "hitl_decider_not_authorized"
                return await structured(
                    admin, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
                )

            answer, asked, _ = await self_approval(agent, decide, baton_env)
        assert answer["success"] is True and answer["decided_via"] == "mcp_admin"
        assert asked["approved"] is True
        async with httpx.AsyncClient() as http:
            wrong = await http.post(
                f"http://127.0.0.1:{port}/mcp", json={}, headers={"Authorization": "Bearer not-a-token"}
            )
        assert wrong.status_code == 401 and wrong.json()["error_class"] == "http_unauthorized"
        assert wrong.headers["www-authenticate"].startswith("Bearer")


async def test_over_loopback_http_without_a_token_nobody_decides_by_mcp(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, None) as agent:

            async def respond(request_id: str) -> dict[str, Any]:
                return await structured(
                    agent, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
                )

            answer, asked, _ = await self_approval(agent, respond, baton_env)
    assert answer["error_class"] == "hitl_decider_not_authorized"
    assert asked["approved"] is False


def test_an_admin_token_equal_to_the_agents_token_is_refused_at_start(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": AGENT_TOKEN}
    done = subprocess.run(
        [sys.executable, "-m", "baton", "serve", "--http", f"127.0.0.1:{free_port()}"],
        env=env,
        capture_output=True,
        timeout=300,  # a hang guard: the refusal comes at start, however slow the machine
        check=False,
    )
    assert done.returncode == 1 and "config_invalid" in done.stderr.decode()
    assert AGENT_TOKEN not in done.stderr.decode()


def test_doctor_shows_who_may_decide(baton_env: dict[str, str]) -> None:
    def deciders(env: dict[str, str]) -> dict[str, Any]:
        done = run_cli(env, "doctor", "--json")
        assert done.returncode == 0, done.stderr
        return next(row for row in json.loads(done.stdout) if row["name"] == "hitl deciders")

    default = deciders(baton_env)
    assert default["ok"] is True and "MCP clients may not decide" in default["detail"]
    opted = deciders({**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"})
    assert opted["ok"] is False and "BATON_HITL_ALLOW_MCP_DECISIONS=1" in opted["detail"]


async def test_an_opted_in_mcp_decision_never_counts_toward_a_quorum(baton_env: dict[str, str]) -> None:
    """The MCP opt-in names no person: on a request that needs two people it is refused and counted
    nowhere, so one person's approval after it is still one of two."""
    env = {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    asked: dict[str, Any] = {}

    def person(verb: str, request_id: str) -> None:
        done = run_cli(env, "hitl", verb, request_id)  # this OS account, the one person on the CLI
        assert done.returncode == 0, done.stderr

    async with stdio_session(env) as session:

        async def ask() -> None:
            arguments = {"request_message": "rotate keys", "timeout_seconds": 3600, "required_approvals": 2}
            asked.update(await call(session, "mcp_request_admin_approval", arguments))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            request_id = (await pending_requests(session))[0]["request_id"]
            refused = await call(
                session, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
            )
            assert refused["error_class"] == "hitl_decider_not_authorized"
            await anyio.to_thread.run_sync(person, "approve", request_id)
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert (status["status"], status["approvals"]) == ("pending", [ME])
            await anyio.to_thread.run_sync(person, "reject", request_id)
    assert asked["approved"] is False and asked["decision"] == "rejected"
    partial = json.loads(
        run_cli(env, "receipts", "list", "--oldest", "--kind", "hitl_partial_approval", "--json").stdout
    )
    assert [r["payload"]["decided_by"] for r in partial] == [ME]


async def test_the_operators_mcp_approval_of_a_quorum_is_counted_and_answered_as_pending(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """The admin token names the operator, one person of the quorum: its approval counts once, and the
    answer says the request still waits (a partial approval is no decision, and the schema says so)."""
    port = free_port()
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    asked: dict[str, Any] = {}
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, AGENT_TOKEN) as agent, http_client(port, ADMIN_TOKEN) as admin:

            async def ask() -> None:
                arguments = {
                    "request_message": "rotate keys",
                    "timeout_seconds": 3600,
                    "required_approvals": 2,
                }
                asked.update(await structured(agent, "mcp_request_admin_approval", arguments))

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                request_id = (await pending_requests(agent))[0]["request_id"]
                approve = {"request_id": request_id, "approved": True}
                partial = await structured(admin, "mcp_respond_to_request", approve)
                assert partial["success"] is True, partial
                assert (partial["status"], partial["decision"], partial["decided"]) == (
                    "pending",
                    "pending",
                    False,
                )
                assert partial["approvals"] == ["operator"] and asked == {}
                again = await structured(admin, "mcp_respond_to_request", approve)
                assert again["error_class"] == "hitl_approval_duplicate"
                done = await anyio.to_thread.run_sync(run_cli, env, "hitl", "approve", request_id)
                assert done.returncode == 0, done.stderr
    assert asked["approved"] is True and asked["decided_by"] == f"operator, {ME}"
