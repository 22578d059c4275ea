"""Elicitation in the 2026-07-28 era by the multi-round-trip pattern, with the official ``mcp.Client``.

The tool answers ``InputRequiredResult``; the client asks its user and retries with ``inputResponses`` and
the sealed ``requestState``, which is bound, single-use and accepted by any replica sharing the home.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.shared.exceptions import MCPError

from baton.config import load_settings
from baton.hitl.mrtr import STATE_TTL_SECONDS, state_key
from tests.cli_process import run_cli
from tests.hitl.helpers import HttpServer

pytestmark = pytest.mark.anyio

APPROVE = {"request_message": "Deploy the release", "timeout_seconds": 3600}
QUESTION = {"question": "Which release?", "timeout_seconds": 3600}


@pytest.fixture
def env(baton_env: dict[str, str]) -> dict[str, str]:
    """Elicitation on; MCP callers may not decide (the default), so only the person's answer counts."""
    return {**baton_env, "BATON_HITL_ELICITATION": "true"}


class Person:
    """The client's user: answers each elicitation with the next of ``answers`` (an ElicitResult)."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return self.answers.pop(0)


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


@asynccontextmanager
async def stdio_client(env: dict[str, str], person: Person, mode: str = "auto") -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    async with Client(params, elicitation_callback=person, mode=mode) as client:  # type: ignore[arg-type]
        yield client


async def structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def pending_id(env: dict[str, str], result: dict[str, Any]) -> str:
    """The one pending request's id, through ``baton hitl list`` (fails at once if the call ended)."""
    with anyio.fail_after(300):  # only stops a hang
        while True:
            assert not result, result
            listed = json.loads(
                (await anyio.to_thread.run_sync(run_cli, env, "hitl", "list", "--json")).stdout
            )
            if listed:
                return str(listed[0]["request_id"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_accepted_form_answers_a_question_but_never_approves(env: dict[str, str], mode: str) -> None:
    """The client's elicitation callback is the agent's own code: it may answer the agent's question, but an
    approval is never put to it, in either era, and only a person (here the CLI) decides it."""
    person = Person(accept(response="blue"), accept(approved=True), accept(approved=True))
    result: dict[str, Any] = {}
    async with stdio_client(env, person, mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        answered = await structured(
            client,
            "mcp_request_admin_input",
            {"question": "Which colour?", "options": ["red", "blue"], "timeout_seconds": 3600},
        )
        assert answered["success"] is True and answered["response"] == "blue"
        assert answered["decided_via"] == "elicitation"

        async def ask() -> None:
            result.update(await structured(client, "mcp_request_admin_approval", APPROVE))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            request_id = await pending_id(env, result)
            decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
            assert decided.returncode == 0, decided.stderr
    assert result["approved"] is False and result["decision"] == "rejected"
    assert result["decided_via"] == "cli"
    assert len(person.asked) == 1 and person.asked[0].mode == "form"
    assert person.asked[0].requested_schema["properties"]["response"]["enum"] == ["red", "blue"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_elicitation_never_answers_and_the_cli_still_decides(
    env: dict[str, str], action: str
) -> None:
    person = Person(types.ElicitResult(action=action))  # type: ignore[arg-type]
    result: dict[str, Any] = {}
    async with stdio_client(env, person) as client:

        async def ask() -> None:
            result.update(await structured(client, "mcp_request_admin_input", QUESTION))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            with anyio.fail_after(300):
                while not person.asked:
                    await anyio.sleep(0.05)
            request_id = person.asked[0].message.split("]", 1)[0].lstrip("[")
            # the retry is now waiting on the other channels; the request is still pending
            listed = await anyio.to_thread.run_sync(run_cli, env, "hitl", "list", "--json")
            assert request_id in listed.stdout
            decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "answer", request_id, "green")
            assert decided.returncode == 0, decided.stderr
    assert result["success"] is True and result["response"] == "green" and result["decided_via"] == "cli"


async def test_a_malformed_answer_is_not_a_decision(env: dict[str, str]) -> None:
    person = Person(accept(response="purple"))  # not one of the options
    async with stdio_client(env, person) as client:
        probe = await structured(
            client,
            "mcp_request_admin_input",
            {"question": "No", "options": ["red", "blue"], "timeout_seconds": 1},
        )
    assert len(person.asked) == 1
    assert probe["success"] is False and probe["timeout"] is True and probe["response"] is None
    assert probe["error_class"] == "hitl_timeout"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("rule", [{"required_approvals": 2}, {"step_up": True}], ids=["quorum", "step-up"])
async def test_a_quorum_or_step_up_request_is_never_put_to_the_client(
    env: dict[str, str], mode: str, rule: dict[str, Any]
) -> None:
    """A client's form answer is the client's word, not two people's or a passkey's: such a request is not
    asked in the client, in either era, and with nobody else deciding it ends unapproved."""
    person = Person(accept(approved=True))
    async with stdio_client(env, person, mode=mode) as client:
        result = await structured(
            client,
            "mcp_request_admin_approval",
            {"request_message": "Two keys", "timeout_seconds": 1, **rule},
        )
    assert person.asked == []
    assert result["success"] is False and result["approved"] is False
    assert result["error_class"] == "hitl_timeout"


async def test_stateless_replicas_accept_each_others_state_once_and_refuse_forgery(
    env: dict[str, str], tmp_path: Path
) -> None:
    stateless = {**env, "BATON_HTTP_STATELESS": "true"}
    first = HttpServer(stateless, tmp_path / "a.log")
    second = HttpServer(stateless, tmp_path / "b.log")
    try:
        async with Client(f"{first.base_url}/mcp", elicitation_callback=Person()) as a:
            interim = await a.session.call_tool(
                "mcp_request_admin_input", QUESTION, allow_input_required=True
            )
        assert isinstance(interim, types.InputRequiredResult) and interim.request_state
        assert interim.input_requests is not None
        state = interim.request_state
        assert "release" not in state and "hr_" not in state  # sealed, not merely signed
        claims = json.loads(AESGCMRequestStateCodec([state_key(load_settings(env))]).unseal(state))
        assert claims["exp"] - claims["iat"] == STATE_TTL_SECONDS and claims["aud"] == "baton"
        assert claims["m"] == "tools/call" and claims["t"] == "mcp_request_admin_input"
        assert set(json.loads(claims["s"])) == {"r", "n", "m"}  # only the request id, a nonce and the mode
        answers = {key: accept(response="v2") for key in interim.input_requests}
        async with Client(f"{second.base_url}/mcp", elicitation_callback=Person()) as b:
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await b.session.call_tool(
                    "mcp_request_admin_input",
                    {**QUESTION, "question": "Which other release?"},  # bound to the arguments
                    input_responses=answers,
                    request_state=state,
                    allow_input_required=True,
                )
            forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await b.session.call_tool(
                    "mcp_request_admin_input", QUESTION, input_responses=answers, request_state=forged
                )
            final = await b.session.call_tool(
                "mcp_request_admin_input", QUESTION, input_responses=answers, request_state=state
            )
            assert isinstance(final, types.CallToolResult) and final.structured_content is not None
            assert final.structured_content["response"] == "v2"
            replay = await b.session.call_tool(
                "mcp_request_admin_input", QUESTION, input_responses=answers, request_state=state
            )
        assert isinstance(replay, types.CallToolResult) and replay.structured_content is not None
        assert replay.structured_content["error_class"] == "mcp_request_state_invalid"
        assert replay.structured_content["reason"] == "used"  # a replay, not a malformed state
        receipts = run_cli(env, "receipts", "list", "--oldest", "--kind", "hitl_decided", "--json")
        decided = json.loads(receipts.stdout)
        assert [receipt["payload"]["via"] for receipt in decided] == ["elicitation"]
        calls = json.loads(
            run_cli(env, "receipts", "list", "--oldest", "--kind", "tool_call", "--json").stdout
        )
        legs = [
            r["payload"].get("input_required", False) for r in calls if r["payload"]["tool"].endswith("input")
        ]
        assert legs.count(True) == 1  # the first leg is receipted as such, not as a decided call
    finally:
        first.stop()
        second.stop()
