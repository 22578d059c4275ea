"""The openai client baton's models use: a chat request's conversation goes out as the plain JSON it already is.

The openai SDK walks every request body against its parameter annotations before sending it
(``async_maybe_transform``), trying each message against every member of the message-parameter union. For a
chat conversation the walk changes nothing, and it costs more than anything else in the SDK: 0.38 ms for a
system and a user message on this project's machine (docs/benchmarks.md), and it grows with the
conversation. The SDK's ``extra_body`` is merged into the body after that walk, key by key, the later value
taking a key's place. So ``messages`` and ``tools`` that are plain JSON (dicts with string keys, lists,
strings, numbers, booleans, None) are handed over there, with an empty list left in the typed argument to
keep the key's place: the request body is byte for byte the one the SDK would have sent
(tests/test_openai_chat_body.py). Anything else (an iterable, a model object, a date) keeps the typed path,
where the walk converts it. A caller's own ``extra_body`` keys win as before.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, cast

from openai import AsyncOpenAI
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions

#: The chat parameters that carry the conversation; the others are a few scalars, cheap to walk.
BULK_FIELDS = ("messages", "tools")


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
    """``params`` of ``chat.completions.create`` with its plain-JSON bulk fields moved into ``extra_body``."""
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
    """``chat.completions`` whose ``create`` sends a plain-JSON conversation past the SDK's walk."""

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
    """``AsyncOpenAI`` whose chat requests send a plain-JSON conversation past the SDK's walk (its copies,
    ``with_options``, are of this class too)."""

    @cached_property
    def chat(self) -> AsyncChat:
        """The chat resource."""
        return PlainBodyChat(self)
