"""baton's openai client sends a chat request past the SDK's body walk, and the body is byte for byte the same."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent, ImageUrl
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from baton.openai_chat_body import (
    PlainBodyCompletions,
    PlainBodyOpenAI,
    is_plain_json,
    past_the_walk,
)
from baton.testing import Behavior, FakeLLMServer

pytestmark = pytest.mark.anyio


async def _tool_round_bodies(client_class: type[AsyncOpenAI], settings: ModelSettings | None) -> list[bytes]:
    """The raw bodies of a pydantic-ai tool round (a system prompt, text and an image from the user, a
    tool call, its result, the final answer) sent through ``client_class`` to a fresh loopback model."""
    with FakeLLMServer() as server:
        server.when("weather", Behavior.calling("lookup", {"city": "Lyon"}, then="Answer: {tool_results}"))
        client = client_class(base_url=server.base_url, api_key="not-needed", max_retries=0)
        try:
            model = OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, system_prompt="You answer with the weather.", model_settings=settings)

            @agent.tool_plain
            def lookup(city: str, days: int = 1, units: str = "metric") -> dict[str, Any]:
                """Look the weather up."""
                return {"city": city, "sky": "sunny", "days": days, "units": units, "ok": True, "rain": None}

            result = await agent.run(
                ["What is the weather? Ünïcode ✓", ImageUrl(url="https://example.invalid/sky.png")]
            )
        finally:
            await client.close()
        assert result.output.startswith("Answer:")
        return [request.raw for request in server.requests]


@pytest.mark.parametrize(
    "settings",
    [None, {"max_tokens": 64, "temperature": 0.0, "extra_body": {"metadata": {"run": "7"}}}],
    ids=["defaults", "settings-and-callers-extra-body"],
)
async def test_a_tool_round_sends_the_same_bytes_as_the_plain_sdk_client(
    settings: ModelSettings | None,
) -> None:
    plain = await _tool_round_bodies(AsyncOpenAI, settings)
    ours = await _tool_round_bodies(PlainBodyOpenAI, settings)

    assert len(ours) == 2  # the call that asks for the tool, and the one with its result
    assert ours == plain
    assert b'"tool_calls"' in ours[1] and b'"role":"tool"' in ours[1].replace(b" ", b"")
    assert b'"image_url"' in ours[0] and b'"tools"' in ours[0]


async def test_copies_of_the_client_keep_the_plain_body_path() -> None:
    client = PlainBodyOpenAI(base_url="http://127.0.0.1:9/v1", api_key="not-needed")
    try:
        copy = client.with_options(max_retries=3)  # what pydantic-ai does for a request's max_retries
        assert isinstance(copy, PlainBodyOpenAI)
        assert isinstance(copy.chat.completions, PlainBodyCompletions)
    finally:
        await client.close()


def test_only_a_non_empty_plain_json_conversation_is_moved() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    moved = past_the_walk({"model": "m", "messages": messages, "tools": tools, "extra_body": None})
    assert moved["messages"] == [] and moved["tools"] == []
    assert moved["extra_body"] == {"messages": messages, "tools": tools}

    # a caller's extra_body keys keep their precedence, as in the SDK's own merge
    mine = past_the_walk({"messages": messages, "extra_body": {"messages": ["theirs"], "x": 1}})
    assert mine["extra_body"] == {"messages": ["theirs"], "x": 1}

    # what the SDK's walk would convert stays on the typed path, untouched
    for odd in ((), iter([]), [("tuple",)], [{"n": 1.5, "when": object()}], [{1: "int key"}]):
        params = {"messages": odd, "tools": [{"ok": True}]}
        assert past_the_walk(params)["messages"] is odd
    assert past_the_walk({"messages": []}) == {"messages": []}


class _Level(enum.IntEnum):
    HIGH = 1


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ({"a": [1, 2.5, "x", True, None, {"b": []}]}, True),
        ([], True),
        ({"a": _Level.HIGH}, False),  # an int subclass: the walk may format it
        ({"a": (1, 2)}, False),
        ({"a": b"bytes"}, False),
        ({("k",): 1}, False),
    ],
)
def test_plain_json_is_exactly_what_json_has(value: object, plain: bool) -> None:
    assert is_plain_json(value) is plain
