"""The optional elicitation channel: capability-detected, off by default, never the only way to decide."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from tests.conftest import call, server_parameters
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio


@pytest.fixture
def baton_env(baton_env: dict[str, str]) -> dict[str, str]:
    """These tests play the operator through MCP, so they opt in to MCP decisions."""
    return {**baton_env, "BATON_HITL_ALLOW_MCP_DECISIONS": "1"}


@asynccontextmanager
async def eliciting_session(env: dict[str, str], answers: list[dict[str, Any] | None]) -> AsyncIterator[Any]:
    """A stdio session whose client answers elicitations from ``answers`` (None declines)."""
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        content = answers.pop(0)
        if content is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    async with (
        stdio_client(server_parameters(env)) as (read, write),
        ClientSession(read, write, elicitation_callback=on_elicit) as session,
    ):
        await session.initialize()
        session.asked = asked  # type: ignore[attr-defined]
        yield session


async def test_an_accepted_elicitation_answers_and_a_declined_or_malformed_one_does_not(
    baton_env: dict[str, str],
) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    answers: list[dict[str, Any] | None] = [{"response": "asked in the client"}, None, {"response": 7}]
    async with eliciting_session(env, answers) as session:
        answered = await call(
            session, "mcp_request_admin_input", {"question": "Elicit me", "timeout_seconds": 3600}
        )
        assert answered["success"] is True and answered["response"] == "asked in the client"
        status = await call(session, "mcp_get_request_status", {"request_id": answered["request_id"]})
        assert status["decided_via"] == "elicitation"
        assert "Elicit me" in session.asked[0].message
        for _ in range(2):  # declined, then malformed: both leave the request to expire unanswered
            probe = await call(session, "mcp_request_admin_input", {"question": "No", "timeout_seconds": 1})
            assert probe["success"] is False and probe["timeout"] is True and probe["response"] is None
        assert answers == []


async def test_elicitation_is_off_by_default(baton_env: dict[str, str]) -> None:
    result: dict[str, Any] = {}
    async with eliciting_session(baton_env, [{"approved": True}]) as session:

        async def ask() -> None:
            result.update(
                await call(
                    session,
                    "mcp_request_admin_approval",
                    {"request_message": "Quiet", "timeout_seconds": 3600},
                )
            )

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            request_id = (await pending_requests(session))[0]["request_id"]
            await call(session, "mcp_respond_to_request", {"request_id": request_id, "approved": False})
        assert session.asked == []
    assert result["success"] is True and result["approved"] is False and result["decision"] == "rejected"
