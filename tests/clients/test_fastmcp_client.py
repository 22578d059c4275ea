"""baton driven by fastmcp's ``Client``, a client nobody here wrote: both connect modes over stdio, and HTTP.

fastmcp parses each tool's ``structuredContent`` against its ``outputSchema`` into ``result.data`` and
raises :class:`~fastmcp.exceptions.ToolError` on ``isError``, so every call below also checks baton's
schemas and error results as that client reads them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

AGENT_TOKEN = "agent-token-for-fastmcp-0123456789abcdef"
#: fastmcp's connect modes: the 2025-11-25 handshake, and ``auto`` (``server/discover``, the 2026-07-28 era).
MODES = ("legacy", "auto")
#: The protocol version each mode settles on with baton.
ERA = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def stdio(env: dict[str, str]) -> StdioTransport:
    """``python -m baton serve`` as fastmcp spawns a stdio server."""
    return StdioTransport(sys.executable, ["-m", "baton", "serve"], env=env)


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_and_call_with_typed_errors(baton_env: dict[str, str], mode: str) -> None:
    async with Client(stdio(baton_env), mode=mode) as client:
        assert client.protocol_version == ERA[mode]
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {"mcp_ping", "mcp_set_timer", "mcp_spawn_subagent"} <= set(tools)
        assert all(tool.output_schema for tool in tools.values())

        pong = await client.call_tool("mcp_ping", {"message": "from fastmcp"})
        assert pong.structured_content is not None
        assert pong.structured_content["success"] is True
        assert pong.structured_content["message"] == "from fastmcp"

        with pytest.raises(ToolError, match="hr_nope"):
            await client.call_tool("mcp_get_request_status", {"request_id": "hr_nope"})
        refused = await client.call_tool(
            "mcp_get_request_status", {"request_id": "hr_nope"}, raise_on_error=False
        )
        assert refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["error_class"] == "hitl_request_not_found"


async def test_a_sync_subagent_answers_through_fastmcp(model_env: dict[str, str], fake_llm: Any) -> None:
    async with Client(stdio(model_env), mode="auto") as client:
        spawned = await client.call_tool(
            "mcp_spawn_subagent",
            {"task": "Summarise the refund policy in one line.", "mode": "sync", "role": "policy reader"},
        )
        answer = spawned.structured_content
        assert answer is not None and answer["success"] is True, answer
        assert answer["status"] == "completed"
        assert answer["result"]
        status = await client.call_tool("mcp_get_subagent_status", {"subagent_id": answer["subagent_id"]})
        assert status.structured_content is not None
        assert status.structured_content["status"] == "completed"
    assert fake_llm.requests, "the subagent's model call reached the loopback model"


async def test_over_http_the_agent_token_calls_and_a_wrong_one_is_refused(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN}
    bind = f"127.0.0.1:{free_port()}"
    url = f"http://{bind}/mcp"
    with http_server(env, bind, tmp_path):
        for mode in MODES:
            async with Client(StreamableHttpTransport(url, auth=AGENT_TOKEN), mode=mode) as client:
                pong = await client.call_tool("mcp_ping", {})
                assert pong.structured_content is not None
                assert pong.structured_content["success"] is True
        # the SDK under fastmcp turns the 401 into an error response: the session never opens
        with pytest.raises(MCPError) as refused:
            async with Client(StreamableHttpTransport(url, auth="wrong-token"), mode="legacy") as client:
                await client.call_tool("mcp_ping", {})
        assert refused.value.error.message == "Server returned an error response"
        assert AGENT_TOKEN not in str(refused.value)
        assert "Traceback" not in (tmp_path / f"serve-{bind.replace(':', '_')}.log").read_text()


@pytest.mark.parametrize("mode", MODES)
async def test_an_elicited_answer_answers_and_a_declined_one_never_does(
    baton_env: dict[str, str], mode: str
) -> None:
    """fastmcp answers the form on the call's stream (legacy) or by retrying with ``requestState`` (auto:
    the 2026-07-28 era's multi-round trip), each by its own code, not baton's."""
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    answers: list[dict[str, Any] | None] = [{"response": "asked in fastmcp"}, None]
    asked: list[str] = []

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        answer = answers.pop(0)
        return ElicitResult(action="decline") if answer is None else answer

    async with Client(stdio(env), mode=mode, elicitation_handler=on_elicit) as client:
        assert client.protocol_version == ERA[mode]
        answered = await client.call_tool(
            "mcp_request_admin_input", {"question": "Rotate the key?", "timeout_seconds": 3600}
        )
        decided = answered.structured_content
        assert decided is not None and decided["response"] == "asked in fastmcp", decided
        status = await client.call_tool("mcp_get_request_status", {"request_id": decided["request_id"]})
        assert status.structured_content is not None
        assert status.structured_content["decided_via"] == "elicitation"

        declined = await client.call_tool(
            "mcp_request_admin_input",
            {"question": "Drop the table?", "timeout_seconds": 1},
            raise_on_error=False,
        )
        outcome = declined.structured_content
        assert outcome is not None and declined.is_error
        assert (outcome["response"], outcome["status"], outcome["error_class"]) == (
            None,
            "expired",
            "hitl_timeout",
        )
    assert answers == [] and "Rotate the key?" in asked[0]
