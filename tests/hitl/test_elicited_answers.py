"""Only an accepted form with an allowed ``response`` answers an input request, on every channel an
elicitation answer arrives by: the 2026-07-28 MRTR retry, the 2025-11-25 back-channel and a task's
``tasks/update``. (An approval is never put to the client's form at all: tests/hitl/test_mrtr.py,
tests/test_stdio_agent.py.)

Each answer below carries a content object that *would* decide if the action or the field were not
checked (``decline`` with ``approved: true`` is the classic). After the server has taken the answer (a
barrier each test names), a person rejects in the CLI; the call must end with that rejection, decided by
the CLI, never by the elicitation.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.cli_process import run_cli
from tests.tasks_client import CreateTaskResult, TasksClient, task_request

pytestmark = pytest.mark.anyio

#: (kind, action, content) answers that must never decide: the action, the field's type or the option is wrong.
NOT_DECISIONS = [
    ("input", "decline", {"response": "red"}),
    ("input", "cancel", {"response": "red"}),
    ("input", "accept", {"response": "green"}),  # not one of the options
    ("input", "accept", {"response": 1}),
    ("input", "accept", None),
]
IDS = [
    "decline-response",
    "cancel-response",
    "accept-response-not-an-option",
    "accept-response-not-text",
    "accept-no-content",
]
#: The hour-long timeout is never what these tests wait for: the CLI decides first, the barrier is an event.
TOOLS = {
    "approval": (
        "mcp_request_admin_approval",
        {"request_message": "Deploy the release", "timeout_seconds": 3600},
    ),
    "input": (
        "mcp_request_admin_input",
        {"question": "Which colour?", "options": ["red", "blue"], "timeout_seconds": 3600},
    ),
}


async def no_back_channel(context: Any, params: Any) -> Any:
    raise AssertionError("a task elicits through inputRequests, never over a back-channel")


def answer(action: str, content: dict[str, Any] | None) -> types.ElicitResult:
    return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]


async def person_decides(env: dict[str, str], kind: str, request_id: str) -> None:
    """The person, in another process: rejects an approval, answers an input with the other option."""
    args = ("reject", request_id) if kind == "approval" else ("answer", request_id, "blue")
    done = await anyio.to_thread.run_sync(run_cli, env, "hitl", *args)
    assert done.returncode == 0, done.stderr


def assert_decided_by_the_cli(kind: str, result: dict[str, Any], status: dict[str, Any]) -> None:
    assert result["success"] is True, result
    if kind == "approval":
        assert result["approved"] is False and result["decision"] == "rejected", result
    else:
        assert result["response"] == "blue", result
    assert status["decided_via"] == "cli", status


@asynccontextmanager
async def client(env: dict[str, str], mode: str, **options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    async with Client(params, mode=mode, **options) as connected:  # type: ignore[arg-type]
        yield connected


async def status_of(connected: Client, request_id: str) -> dict[str, Any]:
    status = await connected.call_tool("mcp_get_request_status", {"request_id": request_id})
    assert isinstance(status.structured_content, dict)
    return status.structured_content


async def decided_after(
    connected: Client,
    env: dict[str, str],
    kind: str,
    on_progress: Any,
    answer_handled: anyio.Event,
    asked: list[Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ask ``kind`` in the background; once the server has handled the client's answer, a person decides
    with the CLI. The tool's result and the request's status after that decision."""
    tool, arguments = TOOLS[kind]
    result: dict[str, Any] = {}

    async def ask() -> None:
        done = await connected.call_tool(tool, arguments, progress_callback=on_progress)
        assert isinstance(done.structured_content, dict), done
        result.update(done.structured_content)

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        with anyio.fail_after(300):  # only stops a hang
            await answer_handled.wait()
        request_id = asked[0].message.split("]", 1)[0].lstrip("[")
        await person_decides(env, kind, request_id)
    return result, await status_of(connected, request_id)


@pytest.mark.parametrize(("kind", "action", "content"), NOT_DECISIONS, ids=IDS)
async def test_an_mrtr_answer_that_is_not_an_accepted_form_never_decides(
    baton_env: dict[str, str], kind: str, action: str, content: dict[str, Any] | None
) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    asked: list[Any] = []
    retried = anyio.Event()

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return answer(action, content)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # only the retry waits (and reports progress), after it has recorded or ignored the answer
        retried.set()

    async with client(env, "auto", elicitation_callback=on_elicit) as connected:
        assert connected.protocol_version == "2026-07-28"
        result, status = await decided_after(connected, env, kind, on_progress, retried, asked)
    assert len(asked) == 1
    assert_decided_by_the_cli(kind, result, status)


@pytest.mark.parametrize(("kind", "action", "content"), NOT_DECISIONS, ids=IDS)
async def test_a_back_channel_answer_that_is_not_an_accepted_form_never_decides(
    baton_env: dict[str, str], kind: str, action: str, content: dict[str, Any] | None
) -> None:
    # progress every 50 ms: a tick sent well after the answer arrived shows the server has handled it
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_HITL_PROGRESS_SECONDS": "0.05"}
    asked: list[Any] = []
    ticks = 0
    ticks_at_answer: int | None = None
    handled = anyio.Event()

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        nonlocal ticks_at_answer
        asked.append(params)
        ticks_at_answer = ticks
        return answer(action, content)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal ticks
        ticks += 1
        if ticks_at_answer is not None and ticks >= ticks_at_answer + 3:
            handled.set()

    async with client(env, "legacy", elicitation_callback=on_elicit) as connected:
        assert connected.protocol_version == "2025-11-25"
        result, status = await decided_after(connected, env, kind, on_progress, handled, asked)
    assert len(asked) == 1
    assert_decided_by_the_cli(kind, result, status)


@pytest.mark.parametrize(("kind", "action", "content"), NOT_DECISIONS, ids=IDS)
async def test_a_task_update_that_is_not_an_accepted_form_never_decides(
    baton_env: dict[str, str], kind: str, action: str, content: dict[str, Any] | None
) -> None:
    # the caller has decision authority, so the task asks a form and a well-formed answer would decide
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    tool, arguments = TOOLS[kind]
    # the elicitation callback only declares the capability: a task elicits through inputRequests
    async with client(
        env, "auto", extensions=[TasksClient()], elicitation_callback=no_back_channel
    ) as connected:
        created = await connected.session.call_tool(tool, arguments, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(300):
            while not (
                state := await task_request(connected.session, "tasks/get", {"taskId": created.task_id})
            ).get("inputRequests"):
                await anyio.sleep(0.05)
        (key,) = state["inputRequests"]
        request_id = state["statusMessage"].split("(", 1)[1].rstrip(").")
        reply = {"action": action, **({"content": content} if content is not None else {})}
        update = {"taskId": created.task_id, "inputResponses": {key: reply}}
        # tasks/update records (or ignores) the answer before it answers: the barrier is its reply
        assert (await task_request(connected.session, "tasks/update", update))["resultType"] == "complete"
        assert (await status_of(connected, request_id))["status"] == "pending"
        await person_decides(env, kind, request_id)
        with anyio.fail_after(300):
            while (state := await task_request(connected.session, "tasks/get", {"taskId": created.task_id}))[
                "status"
            ] != "completed":
                await anyio.sleep(0.05)
        status = await status_of(connected, request_id)
    assert_decided_by_the_cli(kind, state["result"]["structuredContent"], status)


async def test_a_task_form_answered_through_a_replica_without_the_opt_in_never_decides(
    baton_env: dict[str, str],
) -> None:
    # a serve with the opt-in asks the task's form; the same agent answers it through another serve on the
    # same store that has no opt-in: that caller has no decision authority, so the answer must be refused
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_AGENT_NAME": "deployer"}
    options: dict[str, Any] = {"extensions": [TasksClient()], "elicitation_callback": no_back_channel}
    tool, arguments = TOOLS["input"]  # a form never decides an approval at all: the question is the test
    async with client({**env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}, "auto", **options) as opted:
        created = await opted.session.call_tool(tool, arguments, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(300):
            while not (
                state := await task_request(opted.session, "tasks/get", {"taskId": created.task_id})
            ).get("inputRequests"):
                await anyio.sleep(0.05)
        (key,) = state["inputRequests"]
        request_id = state["statusMessage"].split("(", 1)[1].rstrip(").")
        reply = {"action": "accept", "content": {"response": "red"}}
        update = {"taskId": created.task_id, "inputResponses": {key: reply}}
        async with client(env, "auto", **options) as replica:
            with pytest.raises(MCPError) as refused:
                await task_request(replica.session, "tasks/update", update)
        pending = await status_of(opted, request_id)
        await person_decides(env, "input", request_id)
        decided = await status_of(opted, request_id)
    assert refused.value.error.data["error_class"] == "hitl_decider_not_authorized"
    assert pending["status"] == "pending", pending
    assert decided["status"] == "answered" and decided["decided_via"] == "cli", decided


async def test_a_form_answer_to_a_cancelled_task_never_decides(baton_env: dict[str, str]) -> None:
    # the caller may decide and the answer is well formed, but the task was cancelled first: the answer
    # is ignored (a cancelled task keeps its state), the request stays pending and a person decides
    env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}
    options: dict[str, Any] = {"extensions": [TasksClient()], "elicitation_callback": no_back_channel}
    tool, arguments = TOOLS["input"]  # a form never decides an approval at all: the question is the test
    async with client(env, "auto", **options) as connected:
        created = await connected.session.call_tool(tool, arguments, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(300):
            while not (
                state := await task_request(connected.session, "tasks/get", {"taskId": created.task_id})
            ).get("inputRequests"):
                await anyio.sleep(0.05)
        (key,) = state["inputRequests"]
        request_id = state["statusMessage"].split("(", 1)[1].rstrip(").")
        await task_request(connected.session, "tasks/cancel", {"taskId": created.task_id})
        reply = {"action": "accept", "content": {"response": "red"}}
        update = {"taskId": created.task_id, "inputResponses": {key: reply}}
        assert (await task_request(connected.session, "tasks/update", update))["resultType"] == "complete"
        pending = await status_of(connected, request_id)
        await person_decides(env, "input", request_id)
        decided = await status_of(connected, request_id)
    assert pending["status"] == "pending", pending
    assert decided["status"] == "answered" and decided["decided_via"] == "cli", decided
