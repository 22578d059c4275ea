"""baton's openai client sends a chat request past the SDK's body walk, and the body is byte for byte the same."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from openai import AsyncOpenAI, omit
from openai.types.chat import ChatCompletion
from pydantic_ai import Agent, ImageUrl
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from baton.models.openai_chat_body import (
    BODY_ORDER,
    PlainBodyCompletions,
    PlainBodyOpenAI,
    is_plain_json,
    past_the_walk,
)
from baton.testing import Behavior, FakeLLMServer
from baton.testing.loopback import serve_in_thread

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
    [
        None,
        {"max_tokens": 64, "temperature": 0.0, "extra_body": {"metadata": {"run": "7"}}},
        {
            "max_tokens": 64,
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 7,
            "stop_sequences": ["END"],
            "presence_penalty": 0.1,
            "frequency_penalty": 0.2,
            "logit_bias": {"50256": -100},
            "parallel_tool_calls": False,
            "openai_user": "user-1",
            "openai_prompt_cache_key": "cache-1",
            "extra_body": {"model": "fake-model", "x": True},
        },
    ],
    ids=["defaults", "settings-and-callers-extra-body", "many-settings"],
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


def test_a_plain_json_body_goes_whole_into_extra_body_in_the_sdks_order() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    params = {
        "temperature": 0.5,
        "messages": messages,
        "model": "m",
        "stream": False,
        "tools": omit,
        "max_completion_tokens": 64,
        "extra_headers": {"x-a": "1"},
        "timeout": 30.0,
        "extra_body": None,
    }
    moved = past_the_walk(params)
    assert moved["model"] is omit and moved["messages"] is omit  # the typed body is empty
    assert moved["extra_headers"] == {"x-a": "1"} and moved["timeout"] == 30.0
    body = moved["extra_body"]
    assert list(body) == ["model", "stream", "messages", "max_completion_tokens", "temperature"]
    assert list(body) == [name for name in BODY_ORDER if name in body]
    assert body["messages"] is messages and "tools" not in body  # an omitted argument is left out

    # a caller's extra_body keys keep their precedence and their place, as in the SDK's own merge
    mine = past_the_walk({"model": "m", "messages": messages, "extra_body": {"model": "theirs", "x": 1}})
    assert mine["extra_body"] == {"model": "theirs", "messages": messages, "x": 1}
    assert list(mine["extra_body"]) == ["model", "messages", "x"]


def test_what_the_walk_would_convert_keeps_the_typed_path() -> None:
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    # a non-plain scalar: only the plain bulk fields are moved, with placeholders keeping their places
    odd_scalar = past_the_walk(
        {"model": "m", "messages": messages, "tools": tools, "metadata": {"k": object()}}
    )
    assert odd_scalar["model"] == "m" and odd_scalar["messages"] == [] and odd_scalar["tools"] == []
    assert odd_scalar["extra_body"] == {"messages": messages, "tools": tools}

    # a streaming request keeps its typed stream, so the SDK answers with a stream
    streaming = past_the_walk({"model": "m", "messages": messages, "stream": True})
    assert streaming["stream"] is True and streaming["model"] == "m"

    # a parameter this module does not know (a newer SDK's) leaves the request as it is
    newer = {"model": "m", "messages": messages, "brand_new": 1}
    assert past_the_walk(newer) is newer

    for odd in ((), iter([]), [("tuple",)], [{"n": 1.5, "when": object()}], [{1: "int key"}]):
        params = {"model": "m", "messages": odd, "tools": [{"ok": True}]}
        assert past_the_walk(params)["messages"] is odd
    assert past_the_walk({"messages": (), "model": ()}) == {"messages": (), "model": ()}


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


#: A chat completion as OpenAI sends it (a tool call, usage details), and one an OpenAI-compatible server
#: might send (no ``created``, no ``object``, an unknown finish reason, an extra field).
_ANSWERS = {
    "standard": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": 12,
            "total_tokens": 52,
            "prompt_tokens_details": {"cached_tokens": 8},
        },
        "system_fingerprint": "fp_1",
        "vendor_extra": {"kept": True},
    },
    "off-spec": {
        "id": "gen-1",
        "model": "local-model",
        "created": None,
        "choices": [{"index": 0, "finish_reason": "eos", "message": {"role": "assistant", "content": "hi"}}],
    },
}


class _FixedAnswer(BaseHTTPRequestHandler):
    """Answers every POST with the JSON named by the path's first segment."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(_ANSWERS[self.path.split("/")[1]]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def fixed_answers() -> Iterator[str]:
    """A loopback server answering fixed chat completions; its URL."""
    server = serve_in_thread(_FixedAnswer, "fixed-chat-answers")
    try:
        yield server.base_url
    finally:
        server.close()


@pytest.mark.parametrize("answer", list(_ANSWERS))
async def test_an_answer_is_the_same_chat_completion_as_the_plain_sdk_builds(
    fixed_answers: str, answer: str
) -> None:
    async def completion(client_class: type[AsyncOpenAI]) -> ChatCompletion:
        client = client_class(base_url=f"{fixed_answers}/{answer}", api_key="not-needed", max_retries=0)
        try:
            messages: Any = [{"role": "user", "content": "hi"}]
            return await client.chat.completions.create(model="fake-model", messages=messages)
        finally:
            await client.close()

    plain, ours = await completion(AsyncOpenAI), await completion(PlainBodyOpenAI)
    assert type(ours) is ChatCompletion
    assert ours.model_dump() == plain.model_dump()
    assert ours.model_dump(exclude_unset=True) == plain.model_dump(exclude_unset=True)
    assert ours.model_dump_json() == plain.model_dump_json()
    if answer == "standard":  # validated: typed all the way down, the provider's extra field kept
        assert ours.usage is not None and ours.usage.prompt_tokens_details is not None
        assert ours.usage.prompt_tokens_details.cached_tokens == 8
        assert ours.model_extra == {"vendor_extra": {"kept": True}}
        assert "vendor_extra" in ours.model_fields_set  # validated: the SDK's build leaves extras out of it
    else:  # not accepted by the model: built leniently, as the SDK does, for pydantic-ai to judge
        assert ours.created is None and ours.choices[0].finish_reason == "eos"
        assert ours.model_fields_set == plain.model_fields_set
