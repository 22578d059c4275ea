"""Named agents through the real interfaces: ``baton agents`` tokens against ``baton serve --http`` on 127.0.0.1,
and stdio servers (named by ``BATON_AGENT_NAME``, else by the client's ``clientInfo`` as a ``stdio:`` claim).

An agent sees, waits on, cancels and reads only its own requests, tasks, subagents and timers; another
agent's id answers exactly as an unknown id does. Every row and receipt names its agent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.cli_process import run_cli
from tests.conftest import call
from tests.hitl.helpers import pending_requests
from tests.servers import free_port, http_server
from tests.tasks_client import CreateTaskResult, TasksClient, task_request

pytestmark = pytest.mark.anyio

FOREVER = 3600  # no timeout is under test here: every wait is cancelled or decided


def add_agent(env: dict[str, str], name: str, role: str = "agent") -> str:
    """``baton agents add``: the token it prints once."""
    done = run_cli(env, "agents", "add", name, "--role", role)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert len(token) >= 40 and token not in done.stderr
    return token


@asynccontextmanager
async def http_client(port: int, token: str | None, **options: Any) -> AsyncIterator[Client]:
    """The official client over streamable HTTP with ``token`` as its bearer credential."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
        async with Client(transport, **options) as client:
            yield client


async def structured(client: Any, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments or {})
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def receipts(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    """Payloads of the receipts of one kind, through ``baton receipts list``."""
    done = run_cli(env, "receipts", "list", "--kind", kind, "--limit", "1000", "--oldest", "--json")
    assert done.returncode == 0, done.stderr
    return [row["payload"] for row in json.loads(done.stdout)]


async def assert_unknown(client: Any, tool: str, arguments: dict[str, Any], error_class: str) -> None:
    """``tool`` on another agent's id fails exactly as on an id nobody ever had."""
    theirs = await structured(client, tool, arguments)
    key = next(key for key in arguments if key.endswith("_id"))
    made_up = {**arguments, key: arguments[key][:-4] + "zzzz"}
    unknown = await structured(client, tool, made_up)
    assert theirs["success"] is False and theirs["error_class"] == error_class, theirs
    assert unknown["error_class"] == error_class
    assert theirs["error"].replace(arguments[key], "ID") == unknown["error"].replace(made_up[key], "ID")
    assert set(theirs) == set(unknown)


async def test_over_http_each_agent_sees_and_acts_on_only_its_own_rows(
    model_env: dict[str, str], tmp_path: Path
) -> None:
    env = model_env
    alice, bob, watcher = (
        add_agent(env, "alice"),
        add_agent(env, "bob"),
        add_agent(env, "watcher", "observer"),
    )
    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice) as a,
            http_client(port, bob) as b,
            http_client(port, watcher) as w,
            anyio.create_task_group() as group,
        ):
            ask = {"request_message": "Deploy to prod", "timeout_seconds": FOREVER}
            group.start_soon(structured, a, "mcp_request_admin_approval", ask)
            (request,) = await pending_requests(a)
            request_id = request["request_id"]
            assert request["agent"] == "alice"
            listed = await structured(b, "mcp_list_pending_requests")
            assert listed["requests"] == [] and listed["total"] == 0
            await assert_unknown(
                b, "mcp_get_request_status", {"request_id": request_id}, "hitl_request_not_found"
            )
            await assert_unknown(
                b,
                "mcp_wait_for_request",
                {"request_id": request_id, "timeout_seconds": 1},
                "hitl_request_not_found",
            )
            watched = await structured(w, "mcp_list_pending_requests")
            assert [r["request_id"] for r in watched["requests"]] == [request_id]
            assert (await structured(w, "mcp_get_request_status", {"request_id": request_id}))[
                "agent"
            ] == "alice"

            timer = await structured(
                a,
                "mcp_set_timer",
                {"name": "later", "delay_seconds": FOREVER, "action": {"kind": "record"}},
            )
            timer_id = timer["timer_id"]
            assert timer["agent"] == "alice"
            assert (await structured(b, "mcp_list_timers"))["timers"] == []
            await assert_unknown(b, "mcp_cancel_timer", {"timer_id": timer_id}, "timer_not_found")
            # an observer sees every agent's timers but cancels only its own
            assert [t["timer_id"] for t in (await structured(w, "mcp_list_timers"))["timers"]] == [timer_id]
            await assert_unknown(w, "mcp_cancel_timer", {"timer_id": timer_id}, "timer_not_found")

            spawned = await structured(
                a, "mcp_spawn_subagent", {"task": "Summarize the plan", "mode": "async"}
            )
            subagent_id = spawned["subagent_id"]
            assert (await structured(b, "mcp_list_subagents"))["subagents"] == []
            for tool in ("mcp_get_subagent_status", "mcp_cancel_subagent"):
                await assert_unknown(b, tool, {"subagent_id": subagent_id}, "subagent_not_found")
            await assert_unknown(
                b,
                "mcp_send_message_to_subagent",
                {"subagent_id": subagent_id, "message": "and now?"},
                "subagent_not_found",
            )
            mine = await structured(a, "mcp_list_subagents")
            assert [(s["subagent_id"], s["agent"]) for s in mine["subagents"]] == [(subagent_id, "alice")]

            assert (await structured(a, "mcp_cancel_timer", {"timer_id": timer_id}))["status"] == "cancelled"
            decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
            assert decided.returncode == 0, decided.stderr
    assert [p["agent"] for p in receipts(env, "hitl_requested")] == ["alice"]
    assert [p["agent"] for p in receipts(env, "hitl_decided")] == ["alice"]
    assert [p["agent"] for p in receipts(env, "timer_set")] == ["alice"]
    assert [p["agent"] for p in receipts(env, "timer_cancelled")] == ["alice"]
    assert [p["agent"] for p in receipts(env, "subagent_spawned")] == ["alice"]
    calls = receipts(env, "tool_call")
    assert {p["agent"] for p in calls if p["tool"] == "mcp_spawn_subagent"} == {"alice"}
    assert {p["agent"] for p in calls if p["tool"] == "mcp_list_timers"} == {"bob", "watcher"}


async def test_a_revoked_token_gets_401_on_the_next_request_of_the_running_server(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    alice, bob = add_agent(baton_env, "alice"), add_agent(baton_env, "bob")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, alice) as a:
            assert (await structured(a, "mcp_ping", {}))["success"] is True
            revoked = await anyio.to_thread.run_sync(run_cli, baton_env, "agents", "revoke", "alice")
            assert revoked.returncode == 0, revoked.stderr
            async with httpx.AsyncClient() as http:
                refused = await http.post(url, json={}, headers={"Authorization": f"Bearer {alice}"})
                still = await http.post(url, json={}, headers={"Authorization": f"Bearer {bob}"})
                anonymous = await http.post(url, json={})  # with agents registered, no credential is refused
                metrics = await http.get(
                    f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {bob}"}
                )
    assert refused.status_code == 401 and refused.json()["error_class"] == "http_unauthorized"
    assert still.status_code != 401
    assert anonymous.status_code == 401
    assert metrics.status_code == 200
    listed = json.loads(run_cli(baton_env, "agents", "list", "--json").stdout)
    assert [(row["name"], row["active"]) for row in listed] == [("alice", False), ("bob", True)]
    assert alice not in json.dumps(listed) and bob not in json.dumps(listed)


async def test_tasks_are_per_agent_another_agents_task_is_not_found(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    alice, bob = add_agent(baton_env, "alice"), add_agent(baton_env, "bob")
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice, extensions=[TasksClient()]) as a,
            http_client(port, bob, extensions=[TasksClient()]) as b,
        ):
            ask = {"request_message": "Ship it", "timeout_seconds": FOREVER}
            created = await a.session.call_tool("mcp_request_admin_approval", ask, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            task_id = created.task_id
            for method, params in (
                ("tasks/get", {"taskId": task_id}),
                ("tasks/update", {"taskId": task_id, "inputResponses": {"x": {"action": "accept"}}}),
                ("tasks/cancel", {"taskId": task_id}),
            ):
                with pytest.raises(MCPError, match=f"Task not found \\({task_id}\\)"):
                    await task_request(b.session, method, params)
            assert (await task_request(a.session, "tasks/get", {"taskId": task_id}))["status"] == "working"
            await task_request(a.session, "tasks/cancel", {"taskId": task_id})
            assert (await task_request(a.session, "tasks/get", {"taskId": task_id}))["status"] == "cancelled"


async def test_elicitation_never_decides_another_agents_request(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """An observer may wait on alice's request, but its client is never asked, so it cannot approve it."""
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    alice, watcher = add_agent(env, "alice"), add_agent(env, "watcher", "observer")
    asked: list[Any] = []

    async def approve_everything(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approved": True})

    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice, mode="legacy") as a,
            http_client(port, watcher, mode="legacy", elicitation_callback=approve_everything) as w,
            anyio.create_task_group() as group,
        ):
            ask = {"request_message": "Wire the money", "timeout_seconds": FOREVER}
            group.start_soon(structured, a, "mcp_request_admin_approval", ask)
            (request,) = await pending_requests(a)
            request_id = request["request_id"]
            waited = await structured(
                w, "mcp_wait_for_request", {"request_id": request_id, "timeout_seconds": 5}
            )
            status = await structured(w, "mcp_get_request_status", {"request_id": request_id})
            group.cancel_scope.cancel()
    assert asked == []
    assert waited["error_class"] == "hitl_still_pending"
    assert status["status"] == "pending" and status["approved"] is False


async def test_the_pending_cap_is_per_agent(baton_env: dict[str, str], tmp_path: Path) -> None:
    env = {**baton_env, "BATON_HITL_MAX_PENDING_PER_AGENT": "2"}
    alice, bob = add_agent(env, "alice"), add_agent(env, "bob")
    port = free_port()
    ask = {"request_message": "One more", "timeout_seconds": FOREVER}
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice) as a,
            http_client(port, bob) as b,
            anyio.create_task_group() as group,
        ):
            for _ in range(2):
                group.start_soon(structured, a, "mcp_request_admin_approval", ask)
            await pending_requests(a, 2)
            refused = await structured(a, "mcp_request_admin_approval", ask)
            group.start_soon(structured, b, "mcp_request_admin_approval", ask)  # bob has his own cap
            await pending_requests(b, 1)
            group.cancel_scope.cancel()
    assert refused["success"] is False and refused["error_class"] == "hitl_too_many_pending"
    assert refused["limit"] == 2 and refused["pending"] == 2
    assert "BATON_" not in refused["error"]
    assert [p["agent"] for p in receipts(env, "hitl_requested")].count("alice") == 2


@asynccontextmanager
async def named_stdio(env: dict[str, str], client_name: str) -> AsyncIterator[ClientSession]:
    """A stdio server whose client introduces itself as ``client_name``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    info = types.Implementation(name=client_name, version="1.0")
    async with stdio_client(params) as (read, write), ClientSession(read, write, client_info=info) as session:
        await session.initialize()
        yield session


async def test_a_stdio_agent_is_its_clients_claim_unless_baton_agent_name_is_set(
    baton_env: dict[str, str],
) -> None:
    timer = {"name": "t", "delay_seconds": FOREVER, "action": {"kind": "record"}}
    async with named_stdio(baton_env, "claude-code") as first:
        mine = await call(first, "mcp_set_timer", timer)
        async with named_stdio(baton_env, "cursor") as second:
            assert (await call(second, "mcp_list_timers"))["timers"] == []
            theirs = await call(second, "mcp_cancel_timer", {"timer_id": mine["timer_id"]})
        async with named_stdio({**baton_env, "BATON_AGENT_NAME": "ops-bot"}, "cursor") as third:
            named = await call(third, "mcp_set_timer", timer)
    assert mine["agent"] == "stdio:claude-code" and named["agent"] == "ops-bot"
    assert theirs["error_class"] == "timer_not_found"
    assert [p["agent"] for p in receipts(baton_env, "timer_set")] == ["stdio:claude-code", "ops-bot"]


def test_doctor_names_each_agent_and_flags_what_widens_who_decides(baton_env: dict[str, str]) -> None:
    add_agent(baton_env, "alice")
    add_agent(baton_env, "watcher", "observer")
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_HTTP_TOKEN": "static-token-" + "x" * 32}
    done = run_cli(env, "doctor", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    named = rows["agents"]["detail"]
    assert (
        "alice (agent)" in named
        and "watcher (observer)" in named
        and "http-agent (BATON_HTTP_TOKEN)" in named
    )
    assert rows["agents: observers"]["ok"] is False and "watcher" in rows["agents: observers"]["detail"]
    assert rows["hitl elicitation"]["ok"] is False
    assert "static-token-" not in done.stdout


async def test_a_listen_stream_never_follows_another_agents_task(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    alice, bob = add_agent(baton_env, "alice"), add_agent(baton_env, "bob")
    port = free_port()
    acks: list[Any] = []

    async def messages(message: Any) -> None:
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            acks.append(message.params.notifications.model_extra)

    bobs = TasksClient()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with (
            http_client(port, alice, extensions=[TasksClient()]) as a,
            http_client(port, bob, extensions=[bobs], message_handler=messages) as b,
        ):
            ask = {"request_message": "Ship it", "timeout_seconds": FOREVER}
            created = await a.session.call_tool("mcp_request_admin_approval", ask, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            listen = types.Request[dict[str, Any], str](
                method="subscriptions/listen", params={"notifications": {"taskIds": [created.task_id]}}
            )
            with anyio.fail_after(60):
                await b.session.send_request(
                    listen, types.Result
                )  # nothing followed: the stream ends at once
            await task_request(a.session, "tasks/cancel", {"taskId": created.task_id})
    assert acks == [{"taskIds": []}]  # alice's task is left out, as an unknown id is
    assert bobs.notified == []


async def test_the_active_timer_cap_counts_one_agents_timers(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    alice, bob = add_agent(baton_env, "alice"), add_agent(baton_env, "bob")
    env = {**baton_env, "BATON_TIMER_MAX_ACTIVE": "1", "BATON_TIMER_MAX_ACTIVE_TOTAL": "2"}
    later = {"delay_seconds": FOREVER, "action": {"kind": "record"}}
    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, alice) as a, http_client(port, bob) as b:
            first = await structured(a, "mcp_set_timer", {"name": "a1", **later})
            over = await structured(a, "mcp_set_timer", {"name": "a2", **later})
            bobs = await structured(b, "mcp_set_timer", {"name": "b1", **later})
    assert first["success"] is True and bobs["success"] is True, bobs  # alice's timer leaves bob his share
    assert over["error_class"] == "timer_limit_reached" and over["reason"] == "active_timers"
