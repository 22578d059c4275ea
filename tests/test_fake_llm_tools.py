"""The loopback model answers with OpenAI-format tool calls from a script, so a real tool loop runs offline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from baton.testing import Behavior, FakeLLMServer, ToolCall

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def agent_on(server: FakeLLMServer) -> AsyncIterator[Agent[None, str]]:
    """A pydantic-ai agent whose model is the loopback server (its HTTP client closed afterwards)."""
    client = AsyncOpenAI(base_url=server.base_url, api_key="not-needed")
    try:
        yield Agent(OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client)))
    finally:
        await client.close()


async def test_a_scripted_tool_call_runs_the_tool_and_the_final_text_quotes_its_result() -> None:
    seen: list[str] = []
    with FakeLLMServer() as server:
        server.when("weather", Behavior.calling("lookup", {"city": "Lyon"}, then="Answer: {tool_results}"))
        async with agent_on(server) as agent:

            @agent.tool_plain
            def lookup(city: str) -> str:
                seen.append(city)
                return f"sunny in {city}"

            result = await agent.run("What is the weather?")
        bodies = [r.body for r in server.requests]

    assert seen == ["Lyon"]
    assert result.output == "Answer: sunny in Lyon"
    assert len(bodies) == 2
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["lookup"]
    tool_message = bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "sunny in Lyon"


async def test_rounds_follow_the_script_then_the_model_answers_in_text() -> None:
    order: list[str] = []
    script = Behavior(
        tool_rounds=[[ToolCall("step", {"n": 1}), ToolCall("step", {"n": 2})], [ToolCall("step", {"n": 3})]]
    )
    with FakeLLMServer(default=script) as server:
        async with agent_on(server) as agent:

            @agent.tool_plain
            def step(n: int) -> str:
                order.append(f"step {n}")
                return f"did {n}"

            result = await agent.run("go")
        calls = len(server.requests)

    assert sorted(order[:2]) == ["step 1", "step 2"] and order[2:] == ["step 3"]
    assert calls == 3
    assert result.output.startswith("Tool results: ")
    assert "did 3" in result.output


async def test_a_behavior_without_a_script_still_answers_in_text() -> None:
    with FakeLLMServer(default=Behavior(reply="plain answer")) as server:
        async with agent_on(server) as agent:
            result = await agent.run("hello")
    assert result.output == "plain answer"
