"""A governed tool call inside a subagent vs the agent calling the same adapter tool directly, in one run.

One ``baton serve`` (over the same raw pipe client as every benchmark) with the stdlib test server live as
adapter ``demo`` in a bubblewrap sandbox, and the loopback model (``FakeLLMServer``) in this process.
Three calls are timed by the client, interleaved on that one server:

- ``direct``: the agent calls ``demo__echo`` (policy, sandboxed upstream, receipt);
- ``plain spawn``: a sync ``mcp_spawn_subagent`` without tools (one model call);
- ``spawn + tool``: the same spawn with ``tools=["demo__echo"]``, whose model asks for ``demo__echo``
  once and then answers (two model calls and one governed tool call, through pydantic-ai's loop).

Two figures come out, both in units of the agent's direct call (p50 over p50):

- ``governed_call_vs_direct`` (the target): the governed tool call as the model sees it. The loopback
  model stamps when it handed to the socket the answer that asks for ``demo__echo`` and when it finished
  reading the request that carries the tool's result; that interval is everything baton does between the
  two: reading and recording the first model call (its ``model_call`` receipt), pydantic-ai's tool
  dispatch, the gateway path (liveness, policy, sandboxed upstream, ``gateway_call`` receipt), the privacy
  filter, and preparing and sending the second model request (budget checks). It is compared with the
  direct call's round trip as the agent's client sees it (stdio both ways, the same gateway path).
- ``governed_extra_vs_direct`` (kept from the first version): (p50 spawn + tool - p50 plain spawn) /
  p50 direct, what the tool adds to a whole turn, including the one more loopback model round trip
  (the model's own time) and the subagent's bookkeeping of a second model call.

``client_floor``: the model client alone, without baton: pydantic-ai's ``OpenAIChatModel`` (the class baton's
model wraps) sending a request shaped as the subagent's second one (system prompt, task, the tool call and
its result, the tool offered) to the same loopback model from this process, timed the same way (this
client's call until the model read the request, plus the model's answer written until the call returned).
``governed_call_less_client_vs_direct`` = (p50 of the call seen by the model - p50 of that floor) / p50
direct: baton's own share of the interval, in direct calls (an estimate: the floor runs in this process,
beside the loopback model's thread).

``gateway_seconds``: the ``gateway_call`` receipts' own ``duration_seconds`` (policy and upstream, from
the liveness read to the upstream's answer) of the timed direct and subagent calls, read from the store
after the run: the part both paths share; ``gateway_in_subagent_vs_direct`` is their p50 ratio, the
governed part alone, without the model client and pydantic-ai's loop around it.
Run: ``PYTHONPATH=src python -m bench.subagent_tools [ITERATIONS]``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import statistics
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from bench._common import PipeClient, baton_command, baton_env, ratio, summarize, temp_home
from bench._peers import Target
from bench.gateway_proxy import _trivial_adapter
from bench.stdio_roundtrip import interleave

TARGET = 1.2
#: Requests the model-client floor sends before it times any.
WARMUP_FLOOR = 20


def run(iterations: int) -> dict[str, Any]:
    """The three calls on one server; the governed tool call as a ratio of the direct call."""
    from baton.gateway.sandbox import BubblewrapSandbox
    from baton.testing import Behavior, FakeLLMServer

    reason = BubblewrapSandbox().unavailable_reason()
    if reason:
        return {"skipped": f"bubblewrap is unavailable: {reason}"}
    with temp_home() as home, FakeLLMServer() as model:
        model.when("BENCH-TOOL", Behavior.calling("demo__echo", {"text": "ping"}, then="done"))
        model.when("BENCH-PLAIN", Behavior(reply="done"))
        adapter = _trivial_adapter(home)
        env = baton_env(
            home,
            COLLAB_PROVIDER="openai-compatible",
            OPENAI_MODEL="bench-model",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="",
        )
        targets = [
            Target("direct (agent calls demo__echo)", [], f"{adapter}__echo", {"text": "ping"}),
            Target("plain spawn (no tools)", [], "mcp_spawn_subagent", {"task": "BENCH-PLAIN answer"}),
            Target(
                "spawn + governed tool",
                [],
                "mcp_spawn_subagent",
                {"task": "BENCH-TOOL call echo", "tools": [f"{adapter}__echo"]},  # type: ignore[dict-item]
            ),
        ]
        with PipeClient(baton_command(), env) as client:
            client.initialize()
            client.call("tools/list")
            for target in targets:  # each works before anything is timed
                result = client.call("tools/call", {"name": target.tool, "arguments": target.arguments})
                if not (result.get("structuredContent") or {}).get("success"):
                    raise RuntimeError(f"{target.name} failed: {result}")
            rows = interleave([client, client, client], targets, iterations)
        # every governed spawn leaves one interval; the last ``iterations`` are the timed spawns'
        intervals = tool_intervals_ns(model.requests)[-iterations:]
        gateway = gateway_durations(home / "baton.db", iterations)
        floor = asyncio.run(client_floor_ns(model, iterations))
    direct, plain, governed = rows
    seen = {"server": "governed call as the model sees it (tool_calls answered → result arrived)"}
    rows.append({**seen, **summarize(intervals)})
    alone = {"server": "model client alone, no baton (request sent → read, answer written → returned)"}
    rows.append({**alone, **summarize(floor)})
    for row in rows:
        row["p50_vs_direct"] = ratio(row["p50_us"], direct["p50_us"])
    call_value = rows[-2]["p50_vs_direct"]
    less_client = ratio(rows[-2]["p50_us"] - rows[-1]["p50_us"], direct["p50_us"])
    extra_us = governed["p50_us"] - plain["p50_us"]
    extra_value = ratio(extra_us, direct["p50_us"])
    both = gateway["direct_p50"] and gateway["subagent_p50"]
    gateway_value = round(gateway["subagent_p50"] / gateway["direct_p50"], 3) if both else None
    return {
        "title": "governed tool call inside a subagent vs the agent's direct call",
        "rows": rows,
        "governed_call_us": round(rows[-2]["p50_us"], 1),
        "governed_call_vs_direct": call_value,
        "client_floor_us": round(rows[-1]["p50_us"], 1),
        "governed_call_less_client_vs_direct": less_client,
        "governed_extra_us": round(extra_us, 1),
        "governed_extra_vs_direct": extra_value,
        "gateway_seconds": gateway,
        "gateway_in_subagent_vs_direct": gateway_value,
        "targets": [
            {
                "what": f"subagent tools: a governed tool call (model's answer → its result back at the "
                f"model) <= {TARGET}x the agent's direct call",
                "value": call_value,
                "met": call_value <= TARGET if call_value is not None else None,
            },
            {
                "what": "subagent tools (reference, no target): what one tool call adds to a sync spawn, "
                "its extra loopback model round trip included, in direct calls",
                "value": extra_value,
                "met": None,
            },
            {
                "what": "subagent tools (reference, no target): the governed tool call less the model client's "
                "own floor (baton's share), in direct calls",
                "value": less_client,
                "met": None,
            },
            {
                "what": "subagent tools (reference, no target): the governed part alone, the gateway_call "
                "receipt's own duration (liveness, policy, sandboxed upstream) inside the subagent over "
                "the direct call's",
                "value": gateway_value,
                "met": None,
            },
        ],
    }


def tool_intervals_ns(requests: list[Any]) -> list[int]:
    """For each model request that carries a tool result, the nanoseconds since the model handed to the socket
    the answer that asked for the tool (the request before it, with the same conversation up to there)."""
    intervals = []
    for asked, answered in itertools.pairwise(requests):
        messages = answered.body.get("messages") or []
        if not messages or messages[-1].get("role") != "tool" or asked.answered_at is None:
            continue
        before = asked.body.get("messages") or []
        if messages[: len(before)] != before or len(messages) != len(before) + 2:
            raise RuntimeError("a tool result arrived that does not follow the request before it")
        intervals.append(round((answered.received_at - asked.answered_at) * 1e9))
    return intervals


async def client_floor_ns(model: Any, iterations: int) -> list[int]:
    """The model client alone: pydantic-ai's OpenAI chat model sending the subagent's second request (the
    tool call and its result) to ``model``; per request, the client's time on both sides of the model."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.tools import ToolDefinition

    from baton.subagents.context import subagent_system_prompt

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    parameters = ModelRequestParameters(
        function_tools=[ToolDefinition(name="demo__echo", parameters_json_schema=schema, description="echo")]
    )
    call = ToolCallPart("demo__echo", {"text": "ping"}, tool_call_id="call_floor")
    result = {"success": True, "text": "ping", "adapter_id": "demo"}
    messages: list[Any] = [
        ModelRequest(
            parts=[SystemPromptPart(subagent_system_prompt("assistant", "")), UserPromptPart("BENCH-TOOL")]
        ),
        ModelResponse(parts=[call]),
        ModelRequest(parts=[ToolReturnPart("demo__echo", result, tool_call_id="call_floor")]),
    ]
    client = OpenAIChatModel("bench-model", provider=OpenAIProvider(base_url=model.base_url, api_key="bench"))
    samples = []
    for index in range(min(WARMUP_FLOOR, iterations * 10) + iterations):
        sent = len(model.requests)
        started = time.perf_counter()
        await client.request(messages, {"max_tokens": 256}, parameters)
        returned = time.perf_counter()
        seen = model.requests[sent]
        if index >= min(WARMUP_FLOOR, iterations * 10):
            samples.append(round((seen.received_at - started + returned - seen.answered_at) * 1e9))
    return samples


def gateway_durations(database: Path, iterations: int) -> dict[str, float | None]:
    """p50 of the ``gateway_call`` receipts' ``duration_seconds`` of the last ``iterations`` direct and
    subagent calls (the store is read read-only after the server exited)."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        payloads = [
            json.loads(p) for (p,) in db.execute("SELECT payload FROM receipts WHERE kind = 'gateway_call'")
        ]
    direct = [p["duration_seconds"] for p in payloads if not p.get("subagent")][-iterations:]
    inside = [p["duration_seconds"] for p in payloads if p.get("subagent")][-iterations:]
    return {
        "direct_p50": statistics.median(direct) if direct else None,
        "subagent_p50": statistics.median(inside) if inside else None,
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100), indent=2))
