"""The openai client baton's models use: a chat request goes out as the plain JSON it already is, and its
answer is read by the SDK's own model, validated in one step.

**The request.** The openai SDK walks every request body against its parameter annotations before sending
it (``async_maybe_transform``), trying each value against every member of each parameter's union. For a
chat request the walk changes nothing: no chat parameter has a renamed key or a formatted value, and plain
JSON is left as it is. It still costs more than anything else in the SDK: 0.38 ms for a first turn on this
project's machine (docs/benchmarks.md), about 80 µs of it for ``model`` alone (its annotation is a union
with a literal of every model name), and it grows with the conversation. The SDK's ``extra_body`` is
merged into the body after that walk, key by key, the later value taking a key's place. So when every body
parameter is plain JSON (dicts with string keys, lists, strings, numbers, booleans, None) and the request
does not stream, the whole body is handed over there, in the order the SDK writes it, and each typed
argument is left omitted: the request body is byte for byte the one the SDK would have sent
(tests/test_openai_chat_body.py). Otherwise, plain-JSON ``messages`` and ``tools`` alone take that path
(an empty list left in the typed argument keeps the key's place) and the rest keeps the walk, which
converts what is not plain (an iterable, a model object, a date). A parameter this module does not know
(a newer SDK's) leaves the request to the SDK as it is. A caller's own ``extra_body`` keys win as before.

**The answer.** For a chat completion the SDK builds its ``ChatCompletion`` field by field in Python without
validating it (``construct_type``), about 130 µs for a short answer, and pydantic-ai validates it again.
Here the SDK's model validates the decoded answer itself (pydantic's core, about 6 µs); an answer it does
not accept (an OpenAI-compatible server's missing or unusual field) is built the SDK's lenient way, as
before, for pydantic-ai to judge.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, cast

import pydantic
from openai import AsyncOpenAI, NotGiven, Omit, omit
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion

#: The chat parameters that carry the conversation; the others are a few scalars.
BULK_FIELDS = ("messages", "tools")

#: The body's keys in the order the SDK's ``chat.completions.create`` writes them (openai 3.63).
BODY_ORDER = (
    "model",
    "stream",
    "service_tier",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "moderation",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "stop",
    "store",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
)
#: ``create``'s arguments that are options of the request, not keys of its body.
REQUEST_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
_KNOWN = frozenset(BODY_ORDER) | REQUEST_OPTIONS


def is_plain_json(value: object) -> bool:
    """Whether ``value`` is made only of what JSON has: dicts with string keys, lists, strings, numbers,
    booleans and None (the SDK's walk would leave it as it is)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if kind is dict:
        return all(
            type(key) is str and is_plain_json(item) for key, item in cast(dict[Any, Any], value).items()
        )
    if kind is list:
        return all(is_plain_json(item) for item in cast(list[Any], value))
    return False


def past_the_walk(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of ``chat.completions.create`` with what is plain JSON moved into ``extra_body``: the
    whole body when it all is and the request does not stream, else the plain-JSON bulk fields."""
    if not _KNOWN.issuperset(params):
        return params
    body = {
        name: params[name]
        for name in BODY_ORDER
        if name in params and not isinstance(params[name], (Omit, NotGiven))
    }
    if body.get("stream") is True or not is_plain_json(body):
        return _bulk_past_the_walk(params)
    options = {name: params[name] for name in REQUEST_OPTIONS if name in params}
    extra = params.get("extra_body")
    # typed arguments omitted: the SDK's body is empty, and the merge leaves this one, in the SDK's order
    return {**options, "model": omit, "messages": omit, "extra_body": {**body, **extra} if extra else body}


def _bulk_past_the_walk(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with only its plain-JSON bulk fields moved into ``extra_body``."""
    moved = {
        name: params[name]
        for name in BULK_FIELDS
        if type(params.get(name)) is list and params[name] and is_plain_json(params[name])
    }
    if not moved:
        return params
    extra = params.get("extra_body")
    # an empty list in the typed argument keeps each key's place in the body
    placeholders: dict[str, list[Any]] = {name: [] for name in moved}
    return {**params, **placeholders, "extra_body": {**moved, **extra} if extra else moved}


class PlainBodyCompletions(AsyncCompletions):
    """``chat.completions`` whose ``create`` sends a plain-JSON request past the SDK's walk."""

    async def create(self, **params: Any) -> Any:
        """The SDK's ``create`` with :func:`past_the_walk` applied to its arguments."""
        return await super().create(**past_the_walk(params))


class PlainBodyChat(AsyncChat):
    """``chat`` with :class:`PlainBodyCompletions`."""

    @cached_property
    def completions(self) -> AsyncCompletions:
        """The chat completions resource."""
        return PlainBodyCompletions(self._client)


class PlainBodyOpenAI(AsyncOpenAI):
    """``AsyncOpenAI`` whose chat requests send plain JSON past the SDK's walk and whose chat answers are
    validated in one step (its copies, ``with_options``, are of this class too)."""

    @cached_property
    def chat(self) -> AsyncChat:
        """The chat resource."""
        return PlainBodyChat(self)

    def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
        """A chat completion validated by the SDK's model; anything else, or an answer the model does not
        accept, built by the SDK as before."""
        if cast_to is ChatCompletion and type(data) is dict and not self._strict_response_validation:
            try:
                return ChatCompletion.model_validate(data)
            except pydantic.ValidationError:
                pass  # the SDK's lenient build, for pydantic-ai to judge
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)
