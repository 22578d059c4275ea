"""The Tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) with the official ``mcp.Client``.

The client side is :class:`tests.tasks_client.TasksClient`, a ``ClientExtension`` that claims the
extension's ``resultType: "task"`` and polls it, following the spec's example flow::

    {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "task", "taskId": "786512e2-…", "status": "working",
     "createdAt": "…", "lastUpdatedAt": "…", "ttlMs": 3600000, "pollIntervalMs": 5000}}
    {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "786512e2-…"}}
    {"jsonrpc": "2.0", "id": 6, "method": "tasks/update",
     "params": {"taskId": "786512e2-…", "inputResponses": {"name": {"action": "accept", "content": {…}}}}}
    {"jsonrpc": "2.0", "id": 6, "result": {"resultType": "complete"}}
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.extension import advertise
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from tests.cli_process import run_cli
from tests.conftest import server_parameters
from tests.hitl.helpers import HttpServer
from tests.tasks_client import EXTENSION_ID, CreateTaskResult, TasksClient, task_request

pytestmark = pytest.mark.anyio

APPROVE = {"request_message": "Ship it", "timeout_seconds": 3600}


async def no_elicitation(context: Any, params: Any) -> Any:
    raise AssertionError("a task elicits through inputRequests, never over a back-channel")


@asynccontextmanager
async def tasks_client(env: dict[str, str], tasks: TasksClient, **options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    async with Client(params, extensions=[tasks], **options) as client:
        assert client.server_capabilities.extensions and EXTENSION_ID in client.server_capabilities.extensions
        yield client


async def until_status(session: Any, task_id: str, *statuses: str) -> dict[str, Any]:
    with anyio.fail_after(300):
        while (state := await task_request(session, "tasks/get", {"taskId": task_id}))[
            "status"
        ] not in statuses:
            await anyio.sleep(0.05)
    return state


async def waiting_request(session: Any, task_id: str) -> tuple[dict[str, Any], str]:
    """The task's state once it waits on a human request, and that request's id."""
    with anyio.fail_after(300):
        while "statusMessage" not in (state := await task_request(session, "tasks/get", {"taskId": task_id})):
            await anyio.sleep(0.05)
    return state, state["statusMessage"].split("(", 1)[1].rstrip(").")


async def test_a_question_runs_as_a_task_and_its_form_input_is_answered_by_tasks_update(
    baton_env: dict[str, str],
) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    asked: list[Any] = []

    async def person(request: Any) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"response": "via task"}}

    tasks = TasksClient(person)
    async with tasks_client(env, tasks, elicitation_callback=no_elicitation) as client:
        question = {"question": "Which release?", "timeout_seconds": 3600}
        result = await client.call_tool("mcp_request_admin_input", question)
        content = result.structured_content
        assert content is not None and content["response"] == "via task"
        status = await client.call_tool("mcp_get_request_status", {"request_id": content["request_id"]})
    assert len(tasks.created) == 1 and asked[0]["method"] == "elicitation/create"
    assert asked[0]["params"]["mode"] == "form"
    assert any(state["status"] == "input_required" for state in tasks.states)
    assert tasks.states[-1]["status"] == "completed" and tasks.states[-1]["resultType"] == "complete"
    assert status.structured_content is not None and status.structured_content["decided_via"] == "mcp"


async def test_without_decision_authority_the_task_asks_no_form_and_a_person_decides(
    baton_env: dict[str, str],
) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    async with tasks_client(env, TasksClient(), elicitation_callback=no_elicitation) as client:
        created = await client.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
        assert isinstance(created, CreateTaskResult) and created.status == "working"
        state, request_id = await waiting_request(client.session, created.task_id)
        assert state["status"] == "working" and "inputRequests" not in state
        forged = {
            "taskId": created.task_id,
            "inputResponses": {"x": {"action": "accept", "content": {"approved": True}}},
        }
        assert (await task_request(client.session, "tasks/update", forged))["resultType"] == "complete"
        assert (await until_status(client.session, created.task_id, "working"))["status"] == "working"
        decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
        assert decided.returncode == 0, decided.stderr
        done = await until_status(client.session, created.task_id, "completed")
    assert done["result"]["structuredContent"]["approved"] is False
    assert done["result"]["structuredContent"]["decision"] == "rejected"


async def test_cancelling_a_task_that_waits_for_a_human_never_approves(baton_env: dict[str, str]) -> None:
    async with tasks_client(baton_env, TasksClient()) as client:
        created = await client.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        _, request_id = await waiting_request(client.session, created.task_id)
        ack = await task_request(client.session, "tasks/cancel", {"taskId": created.task_id})
        assert ack["resultType"] == "complete"
        cancelled = await until_status(client.session, created.task_id, "cancelled")
        assert "result" not in cancelled
        pending = await client.call_tool("mcp_get_request_status", {"request_id": request_id})
        assert pending.structured_content is not None and pending.structured_content["status"] == "pending"
        late = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "approve", request_id)
        assert late.returncode == 0, late.stderr
        after = await until_status(client.session, created.task_id, "cancelled", "completed")
        status = await client.call_tool("mcp_get_request_status", {"request_id": request_id})
    assert after["status"] == "cancelled"  # a terminal state is never overwritten
    assert status.structured_content is not None and status.structured_content["waiter_gone"] is True


async def test_a_sync_subagent_runs_as_a_task_and_an_async_one_does_not(model_env: dict[str, str]) -> None:
    tasks = TasksClient()
    async with tasks_client(model_env, tasks) as client:
        result = await client.call_tool("mcp_spawn_subagent", {"task": "Say hello"})
        assert result.structured_content is not None and result.structured_content["status"] == "completed"
        spawned = result.structured_content["subagent_id"]
        reply = await client.call_tool(
            "mcp_send_message_to_subagent", {"subagent_id": spawned, "message": "More"}
        )
        assert reply.structured_content is not None and reply.structured_content["turn"] == 2
        started = await client.call_tool("mcp_spawn_subagent", {"task": "Later", "mode": "async"})
        assert started.structured_content is not None and started.structured_content["status"] == "running"
    assert len(tasks.created) == 2


async def test_a_client_that_does_not_declare_tasks_gets_plain_results_and_no_task_methods(
    baton_env: dict[str, str],
) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=baton_env)
    async with Client(params, extensions=[advertise("org.example/other")]) as client:
        with pytest.raises(MCPError) as refused:
            await task_request(client.session, "tasks/get", {"taskId": "task_x"})
        assert refused.value.error.code == -32021
        result = await client.call_tool(
            "mcp_request_admin_approval", {"request_message": "x", "timeout_seconds": 1}
        )
    assert (
        result.structured_content is not None and result.structured_content["error_class"] == "hitl_timeout"
    )


async def test_any_replica_answers_for_a_task_even_after_its_process_died(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_STATELESS": "true"}
    first = HttpServer(env, tmp_path / "a.log")
    second = HttpServer(env, tmp_path / "b.log")
    try:
        async with Client(f"{first.base_url}/mcp", extensions=[TasksClient()]) as a:
            created = await a.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            _, request_id = await waiting_request(a.session, created.task_id)
        first.stop()  # the process running the call is gone
        decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "approve", request_id)
        assert decided.returncode == 0, decided.stderr
        async with Client(f"{second.base_url}/mcp", extensions=[TasksClient()]) as b:
            done = await until_status(b.session, created.task_id, "completed")
            with pytest.raises(MCPError, match="Task not found"):
                await task_request(b.session, "tasks/get", {"taskId": "task_unknown"})
    finally:
        first.stop()
        second.stop()
    assert done["result"]["structuredContent"]["approved"] is True


async def test_a_task_offers_the_inbox_page_as_a_url_input_request_and_the_person_decides_after_login(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    from tests.hitl.test_url_elicitation import ADMIN_TOKEN, decide_in_browser

    inbox = HttpServer({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "inbox.log")
    try:
        env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_PUBLIC_URL": inbox.base_url}
        asked: list[Any] = []

        async def person(request: Any) -> dict[str, Any]:
            asked.append(request)
            await anyio.to_thread.run_sync(decide_in_browser, request["params"]["url"], "reject")
            return {"action": "accept"}

        async with tasks_client(env, TasksClient(person), elicitation_callback=no_elicitation) as client:
            result = await client.call_tool("mcp_request_admin_approval", APPROVE)
            content = result.structured_content
            assert content is not None
            status = await client.call_tool("mcp_get_request_status", {"request_id": content["request_id"]})
    finally:
        inbox.stop()
    page = f"{inbox.base_url}/inbox/requests/{content['request_id']}"
    assert asked[0]["params"]["mode"] == "url" and asked[0]["params"]["url"] == page
    assert content["approved"] is False and content["decision"] == "rejected"
    assert (
        status.structured_content is not None and status.structured_content["decided_via"] == "admin_token"
    )  # the operator logged in with the admin token
    assert status.structured_content["waiter_gone"] is False


async def listen(session: Any, notifications: dict[str, Any]) -> Any:
    """One ``subscriptions/listen`` call; returns when the server ends the stream gracefully."""
    request = types.Request[dict[str, Any], str](
        method="subscriptions/listen", params={"notifications": notifications}
    )
    return await session.send_request(request, types.Result)


async def test_a_declaring_client_follows_its_task_on_a_listen_stream_until_it_completes(
    baton_env: dict[str, str],
) -> None:
    tasks = TasksClient()
    acks: list[Any] = []

    async def messages(message: Any) -> None:
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            acks.append(message.params)

    async with tasks_client(baton_env, tasks, message_handler=messages) as client:
        created = await client.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        _, request_id = await waiting_request(client.session, created.task_id)
        with pytest.raises(MCPError) as too_many:
            await listen(client.session, {"taskIds": [f"task_{n}" for n in range(101)]})
        assert too_many.value.error.code == -32602
        ended: list[Any] = []

        async def follow() -> None:
            filters = {"taskIds": [created.task_id, "task_unknown"], "toolsListChanged": True}
            ended.append(await listen(client.session, filters))

        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            with anyio.fail_after(300):
                while not tasks.notified:
                    await anyio.sleep(0.05)
            decided = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "approve", request_id)
            assert decided.returncode == 0, decided.stderr
    stream = ended[0].meta[SUBSCRIPTION_ID_META_KEY]
    honored = acks[0].notifications
    assert honored.model_extra == {"taskIds": [created.task_id]}  # the unknown id is not followed
    assert honored.tools_list_changed is None  # baton publishes no list-change events
    assert acks[0].meta[SUBSCRIPTION_ID_META_KEY] == stream
    assert [note["_meta"][SUBSCRIPTION_ID_META_KEY] for note in tasks.notified] == [stream] * len(
        tasks.notified
    )
    assert tasks.notified[0]["status"] == "working" and request_id in tasks.notified[0]["statusMessage"]
    last = tasks.notified[-1]
    assert last["taskId"] == created.task_id and last["status"] == "completed"
    assert last["result"]["structuredContent"]["approved"] is True
    assert len(tasks.notified) == len({note["lastUpdatedAt"] for note in tasks.notified})  # one per change


async def test_a_client_that_did_not_declare_tasks_asking_for_task_notifications_gets_32021(
    baton_env: dict[str, str],
) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=baton_env)
    async with Client(params, extensions=[advertise("org.example/other")]) as client:
        with pytest.raises(MCPError) as refused:
            await listen(client.session, {"taskIds": ["task_x"]})
        with pytest.raises(MCPError) as malformed:
            await listen(client.session, {"taskIds": "task_x"})
        nothing = await listen(client.session, {"toolsListChanged": True})  # acknowledged empty, then ended
        capabilities = client.server_capabilities
    assert refused.value.error.code == malformed.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}
    assert nothing.meta[SUBSCRIPTION_ID_META_KEY] is not None
    assert capabilities.tools is not None and capabilities.tools.list_changed is False


async def test_a_2025_11_25_session_has_no_task_methods(baton_env: dict[str, str]) -> None:
    async with (
        stdio_client(server_parameters(baton_env)) as (read, write),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        refusals = []
        methods = (
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "tasks/list",
            "tasks/result",
            "subscriptions/listen",
        )
        for method in methods:
            with pytest.raises(MCPError) as refused:
                await task_request(session, method, {"taskId": "task_x", "inputResponses": {}})
            refusals.append(refused.value.error.code)
    assert initialized.protocol_version == "2025-11-25"
    assert initialized.capabilities.tasks is None and initialized.capabilities.extensions is None
    assert refusals == [-32601] * 6


async def test_task_notifications_reach_a_client_over_stateless_http(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_STATELESS": "true"}
    server = HttpServer(env, tmp_path / "server.log")
    tasks = TasksClient()
    try:
        async with Client(f"{server.base_url}/mcp", extensions=[tasks]) as client:
            created = await client.session.call_tool(
                "mcp_request_admin_approval", APPROVE, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            _, request_id = await waiting_request(client.session, created.task_id)
            async with anyio.create_task_group() as group:
                group.start_soon(listen, client.session, {"taskIds": [created.task_id]})
                with anyio.fail_after(300):
                    while not tasks.notified:
                        await anyio.sleep(0.05)
                decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
                assert decided.returncode == 0, decided.stderr
    finally:
        server.stop()
    assert [note["status"] for note in tasks.notified] == ["working", "completed"]
    assert tasks.notified[-1]["result"]["structuredContent"]["decision"] == "rejected"


async def test_a_task_cancelled_through_a_replica_stays_cancelled_when_its_call_ends_later(
    baton_env: dict[str, str],
) -> None:
    # two stdio serves on one store, the same agent: the first runs the approval as a task, the second
    # cancels it (the first's call keeps waiting); then a person approves, and the first's call ends with
    # the approval. The cancelled task must keep its first terminal state. A second task waiting on the same
    # request in the first serve (woken after the first, on the same event) is the barrier: once it has
    # completed, the first call has ended too. No progress tick reorders the two waiters.
    env = {**baton_env, "BATON_AGENT_NAME": "deployer", "BATON_HITL_PROGRESS_SECONDS": "3600"}
    async with tasks_client(env, TasksClient()) as first:
        created = await first.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        _, request_id = await waiting_request(first.session, created.task_id)
        waiter = await first.session.call_tool(
            "mcp_wait_for_request", {"request_id": request_id}, allow_claimed=True
        )
        assert isinstance(waiter, CreateTaskResult)
        await waiting_request(first.session, waiter.task_id)
        async with tasks_client(env, TasksClient()) as replica:
            await task_request(replica.session, "tasks/cancel", {"taskId": created.task_id})
            cancelled = await task_request(replica.session, "tasks/get", {"taskId": created.task_id})
        approved = await anyio.to_thread.run_sync(run_cli, env, "hitl", "approve", request_id)
        assert approved.returncode == 0, approved.stderr
        barrier = await until_status(first.session, waiter.task_id, "completed")
        after = await task_request(first.session, "tasks/get", {"taskId": created.task_id})
    assert cancelled["status"] == "cancelled"
    assert barrier["result"]["structuredContent"]["approved"] is True
    assert after["status"] == "cancelled" and "result" not in after, after


async def test_another_agents_task_is_not_found_through_any_server_on_the_same_store(
    baton_env: dict[str, str],
) -> None:
    alice_env = {**baton_env, "BATON_AGENT_NAME": "alice"}
    async with tasks_client(alice_env, TasksClient()) as alice:
        created = await alice.session.call_tool("mcp_request_admin_approval", APPROVE, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        _, request_id = await waiting_request(alice.session, created.task_id)
        task = {"taskId": created.task_id}
        async with tasks_client({**baton_env, "BATON_AGENT_NAME": "bob"}, TasksClient()) as bob:
            for method, params in (
                ("tasks/get", task),
                ("tasks/cancel", task),
                ("tasks/update", {**task, "inputResponses": {}}),
            ):
                with pytest.raises(MCPError, match="Task not found"):
                    await task_request(bob.session, method, params)
        still = await task_request(alice.session, "tasks/get", task)
        rejected = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "reject", request_id)
        assert rejected.returncode == 0, rejected.stderr
        done = await until_status(alice.session, created.task_id, "completed", "cancelled")
    assert still["status"] != "cancelled"
    assert done["status"] == "completed" and done["result"]["structuredContent"]["decision"] == "rejected"
