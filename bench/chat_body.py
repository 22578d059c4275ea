"""A chat request's body on its way into the openai SDK: the SDK's walk against baton's plain-body path.

The openai SDK walks every request body against its parameter annotations before sending it
(``async_maybe_transform``, a private helper of the SDK: the module is skipped when a release drops it).
Baton's client (``baton.models.openai_chat_body``) hands a plain-JSON body past that walk through the SDK's
``extra_body``; what it still pays is its own check that the body is plain JSON and the SDK's walk of what
is left (the typed arguments, each omitted). Both are timed in
this process on the same bodies: a subagent's conversation after 0, 5, 25 and 100 tool rounds (a user
message, the model's tool call, the tool's result and the model's answer each), with eight tool
definitions. ``plain_vs_sdk`` is baton's path over the SDK's walk.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

ROUNDS = (0, 5, 25, 100)
TOOLS = 8


def conversation(rounds: int) -> dict[str, Any]:
    """A chat body as pydantic-ai builds it after ``rounds`` tool rounds."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a subagent. Answer the task."}]
    for index in range(rounds):
        arguments = json.dumps({"city": "Lyon", "day": index})
        call = {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "lookup", "arguments": arguments},
        }
        messages += [
            {"role": "user", "content": f"task {index}: " + "look the weather up " * 8},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{index}", "content": "sunny and mild " * 10},
            {"role": "assistant", "content": "It is sunny. " * 10},
        ]
    messages.append({"role": "user", "content": "and tomorrow?"})
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "day": {"type": "integer"}}}
    tools = [
        {
            "type": "function",
            "function": {"name": f"tool_{n}", "description": "A tool.", "parameters": schema},
        }
        for n in range(TOOLS)
    ]
    return {"model": "fake-model", "messages": messages, "tools": tools, "max_completion_tokens": 1024}


def timed_ms(body: dict[str, Any], plain: bool, count: int) -> float:
    """CPU milliseconds per request of the SDK's walk of ``body`` (``plain``: of what baton's path leaves
    it, the check included)."""
    from openai._utils._transform import async_maybe_transform
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    from baton.models.openai_chat_body import past_the_walk

    async def walk() -> None:
        params = past_the_walk({**body, "extra_body": None}) if plain else body
        typed = {key: value for key, value in params.items() if key != "extra_body"}
        await async_maybe_transform(typed, CompletionCreateParamsNonStreaming)

    async def repeated() -> float:
        await walk()
        started = time.process_time()
        for _ in range(count):
            await walk()
        return (time.process_time() - started) * 1000 / count

    return asyncio.run(repeated())


def run(iterations: int) -> dict[str, Any]:
    """Both paths at each conversation size (the smoke: one repetition of the two smallest)."""
    try:
        import openai._utils._transform  # noqa: F401
    except ImportError:
        return {"title": "chat body", "skipped": "the openai SDK has no async_maybe_transform"}
    sizes = ROUNDS if iterations > 1 else ROUNDS[:2]
    rows = []
    for rounds in sizes:
        body = conversation(rounds)
        count = max(1, iterations // (1 + rounds // 5))
        sdk, plain = timed_ms(body, False, count), timed_ms(body, True, count)
        rows.append(
            {
                "messages": len(body["messages"]),
                "tools": TOOLS,
                "sdk_walk_ms": round(sdk, 3),
                "plain_body_ms": round(plain, 3),
                "plain_vs_sdk": round(plain / sdk, 3) if sdk else None,
            }
        )
    largest = rows[-1]
    return {
        "title": "a chat request's body: the openai SDK's walk vs baton's plain-body path (CPU per request)",
        "rows": rows,
        "targets": [
            {
                "what": f"chat body (reference, no target): baton's path over the SDK's walk at "
                f"{largest['messages']} messages",
                "value": largest["plain_vs_sdk"],
                "met": None,
            }
        ],
    }


if __name__ == "__main__":
    import sys

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 200), indent=2))
