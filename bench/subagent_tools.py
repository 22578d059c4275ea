"""A governed tool call inside a subagent vs the agent calling the same adapter tool directly, in one run.

One ``baton serve`` (over the same raw pipe client as every benchmark) with the stdlib test server live as
adapter ``demo`` in a bubblewrap sandbox, and the loopback model (``FakeLLMServer``) in this process.
Three calls are timed by the client on that one server, one of each in turn (``paced``):

- ``direct``: the agent calls ``demo__echo`` (policy, sandboxed upstream, receipt), once between two spawns,
  as the subagent's tool call comes between its model calls: right after other work, with the upstream
  idle since the last call. The same call back to back (a block before, every cache warm) is a reference
  row: on this machine it is about half as long, and an agent, whose calls come seconds apart, never sees
  it. Judging a tool call inside a spawn against it would measure the pacing, not the governance;
- ``plain spawn``: a sync ``mcp_spawn_subagent`` without tools (one model call);
- ``spawn + tool``: the same spawn with ``tools=["demo__echo"]``, whose model asks for ``demo__echo``
  once and then answers (two model calls and one governed tool call, through pydantic-ai's loop).

The server is started by ``bench/peers/tool_round_stamps.py``, which stamps (in that process only) where a
governed turn enters and leaves baton's model wrapper, pydantic-ai's model client and baton's toolset.
Figures come out in units of the agent's direct call (p50 over p50):

- ``governed_tool_call_vs_direct`` (the target): the governed tool call itself, from pydantic-ai's loop
  handing it to baton's toolset (``GovernedToolset.call_tool``) to the result handed back: the registry,
  liveness, policy, the sandboxed upstream, the ``gateway_call`` receipt and the privacy filter. It is the
  subagent's counterpart of the direct call, which is timed from the agent's client handing the request to
  baton (its pipe) to the answer read back: in both, the caller's own work before and after is outside.
- ``baton_round_vs_direct``: everything baton does in one tool round: recording the model call that asked
  for the tool (its ``model_call`` receipt and budget settlement, after the model client returned), the
  governed tool call, and preparing the next model call (budget check, links) until it is handed to the
  model client. ``loop_steps_vs_direct``: pydantic-ai's own steps in the same round (between baton's
  model wrapper and its toolset, both ways).
- ``governed_call_vs_direct`` (the fifth round's target, kept as a reference): the governed tool call as
  the model sees it. The loopback model stamps when it handed to the socket the answer that asks for
  ``demo__echo`` and when it finished reading the request that carries the tool's result; that interval is
  everything between the two: the model client reading the answer, baton's round above, pydantic-ai's
  steps, and the model client sending the next request. The model client and pydantic-ai's loop are most
  of it (``client_floor`` and ``agent_loop_floor`` below), which no governance can remove.
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

``agent_loop_floor``: pydantic-ai's own ``Agent`` loop without baton, in a child process (as ``baton serve``
is one): an ``Agent`` over the same ``OpenAIChatModel`` and loopback model, with a no-op ``demo__echo``
function tool, the same system prompt and the same script (ask for the tool, then answer), timed exactly
as the governed call (the loopback model's stamps, tool call answered → result arrived). It is the floor any
subagent built on pydantic-ai's ``Agent.run`` pays per tool round: the model client both ways, the graph's
steps, tool dispatch and validation. ``governed_call_less_loop_vs_direct`` = (p50 governed call - p50 of
that floor) / p50 direct: what baton's governance adds over the loop it runs on, in direct calls.
Run: ``PYTHONPATH=src python -m bench.subagent_tools [ITERATIONS]``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from bench._common import ROOT, SRC, PipeClient, baton_env, peer_command, ratio, summarize, temp_home
from bench._peers import Target
from bench.gateway_proxy import _trivial_adapter
from bench.peers.tool_round_stamps import TOOL_ROUND
from bench.stdio_roundtrip import WARMUP, call_block

TARGET = 1.2
#: Requests the model-client floor sends before it times any.
WARMUP_FLOOR = 20
#: What the agent-loop floor's model is asked (a rule of the loopback model; no baton task contains it).
LOOP_MARKER = "BENCH-LOOP-FLOOR"


def run(iterations: int) -> dict[str, Any]:
    """The three calls on one server; the governed tool call as a ratio of the direct call."""
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox
    from baton.testing import Behavior, FakeLLMServer

    reason = BubblewrapSandbox().unavailable_reason()
    if reason:
        return {"skipped": f"bubblewrap is unavailable: {reason}"}
    with (
        temp_home() as home,
        FakeLLMServer() as model,
        tempfile.TemporaryDirectory(prefix="baton-round-") as tmp,
    ):
        stamps_file = Path(tmp) / "stamps"
        model.when("BENCH-TOOL", Behavior.calling("demo__echo", {"text": "ping"}, then="done"))
        model.when("BENCH-PLAIN", Behavior(reply="done"))
        model.when(LOOP_MARKER, Behavior.calling("demo__echo", {"text": "ping"}, then="done"))
        adapter = _trivial_adapter(home)
        env = baton_env(
            home,
            COLLAB_PROVIDER="openai-compatible",
            OPENAI_MODEL="bench-model",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="",
        )
        targets = [
            Target(
                "direct (agent calls demo__echo, one between spawns)",
                [],
                f"{adapter}__echo",
                {"text": "ping"},
            ),
            Target("plain spawn (no tools)", [], "mcp_spawn_subagent", {"task": "BENCH-PLAIN answer"}),
            Target(
                "spawn + governed tool",
                [],
                "mcp_spawn_subagent",
                {"task": "BENCH-TOOL call echo", "tools": [f"{adapter}__echo"]},  # type: ignore[dict-item]
            ),
        ]
        with PipeClient(peer_command("tool_round_stamps.py", str(stamps_file)), env) as client:
            client.initialize()
            client.call("tools/list")
            for target in targets:  # each works before anything is timed
                result = client.call("tools/call", {"name": target.tool, "arguments": target.arguments})
                if not (result.get("structuredContent") or {}).get("success"):
                    raise RuntimeError(f"{target.name} failed: {result}")
            rows = paced(client, targets, iterations)
        # every governed spawn leaves one interval; the last ``iterations`` are the timed spawns'
        intervals = tool_intervals_ns(model.requests)[-iterations:]
        gateway = gateway_durations(home / "baton.db", iterations)
        spans = tool_round_spans(stamps_file.read_text())[-iterations:]
        floor = asyncio.run(client_floor_ns(model, iterations))
        loop = agent_loop_floor_ns(model, iterations)
    back_to_back, direct, plain, governed = rows
    seen = {"server": "governed call as the model sees it (tool_calls answered → result arrived)"}
    call = {**seen, **summarize(intervals)}
    alone = {"server": "model client alone, no baton (request sent → read, answer written → returned)"}
    client = {**alone, **summarize(floor)}
    bare = {
        "server": "pydantic-ai Agent loop alone, no baton, no-op tool (child process; as the model sees it)"
    }
    loop_row = {**bare, **summarize(loop)}
    tool = {
        "server": "governed tool call (pydantic-ai's loop hands it to baton's toolset → result back)",
        **summarize([span["tool"] for span in spans]),
    }
    baton_round = {
        "server": "baton's share of the tool round (model call recorded, tool call, next call prepared)",
        **summarize([span["baton"] for span in spans]),
    }
    steps = {"server": "pydantic-ai's loop steps in the round", **summarize([span["loop"] for span in spans])}
    rows = [direct, back_to_back, plain, governed, tool, baton_round, steps, call, client, loop_row]
    for row in rows:
        row["p50_vs_direct"] = ratio(row["p50_us"], direct["p50_us"])
    tool_value = tool["p50_vs_direct"]
    call_value = call["p50_vs_direct"]
    less_client = ratio(call["p50_us"] - client["p50_us"], direct["p50_us"])
    less_loop = ratio(call["p50_us"] - loop_row["p50_us"], direct["p50_us"])
    extra_us = governed["p50_us"] - plain["p50_us"]
    extra_value = ratio(extra_us, direct["p50_us"])
    both = gateway["direct_p50"] and gateway["subagent_p50"]
    gateway_value = round(gateway["subagent_p50"] / gateway["direct_p50"], 3) if both else None
    return {
        "title": "governed tool call inside a subagent vs the agent's direct call",
        "rows": rows,
        "direct_us": round(direct["p50_us"], 1),
        "governed_tool_call_us": round(tool["p50_us"], 1),
        "governed_tool_call_vs_direct": tool_value,
        "baton_round_us": round(baton_round["p50_us"], 1),
        "baton_round_vs_direct": baton_round["p50_vs_direct"],
        "loop_steps_us": round(steps["p50_us"], 1),
        "loop_steps_vs_direct": steps["p50_vs_direct"],
        "governed_call_us": round(call["p50_us"], 1),
        "governed_call_vs_direct": call_value,
        "client_floor_us": round(client["p50_us"], 1),
        "governed_call_less_client_vs_direct": less_client,
        "agent_loop_floor_us": round(loop_row["p50_us"], 1),
        "agent_loop_floor_vs_direct": loop_row["p50_vs_direct"],
        "governed_call_less_loop_vs_direct": less_loop,
        "governed_extra_us": round(extra_us, 1),
        "governed_extra_vs_direct": extra_value,
        "gateway_seconds": gateway,
        "gateway_in_subagent_vs_direct": gateway_value,
        "targets": [
            {
                "what": f"subagent tools: a governed tool call inside a subagent (its loop hands the call to "
                f"baton → the result back) <= {TARGET}x the agent's direct call",
                "value": tool_value,
                "met": tool_value <= TARGET if tool_value is not None else None,
            },
            {
                "what": "subagent tools (reference, no target): baton's whole share of a tool round (the "
                "model call that asked recorded, the tool call, the next model call prepared), in direct calls",
                "value": baton_round["p50_vs_direct"],
                "met": None,
            },
            {
                "what": "subagent tools (reference, no target; the fifth round's target): the governed tool "
                "call as the model sees it (its answer → the tool's result back at the model: the model "
                "client both ways and pydantic-ai's loop included), in direct calls",
                "value": call_value,
                "met": None,
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
                "what": "subagent tools (reference, no target): pydantic-ai's Agent loop alone (no baton, a "
                "no-op tool), one tool round as the model sees it, in direct calls: the floor of any subagent "
                "run by Agent.run",
                "value": loop_row["p50_vs_direct"],
                "met": None,
            },
            {
                "what": "subagent tools (reference, no target): the governed tool call less that Agent loop "
                "floor (what baton's governance adds over the loop), in direct calls",
                "value": less_loop,
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


def paced(client: PipeClient, targets: list[Target], iterations: int) -> list[dict[str, Any]]:
    """The direct call back to back (a reference), then one call of each target in turn, ``iterations`` times:
    the direct call is timed as often, and as long after other work, as the subagent's tool call is."""
    for target in targets:
        call_block(client, target, min(WARMUP, iterations * 10), [])
    direct = targets[0]
    back_to_back: list[int] = []
    call_block(client, direct, iterations, back_to_back)
    samples: list[list[int]] = [[] for _ in targets]
    for _ in range(iterations):
        for target, bucket in zip(targets, samples, strict=True):
            call_block(client, target, 1, bucket)
    return [
        {
            "server": "direct, back to back (reference: the best case, every cache warm)",
            **summarize(back_to_back),
        },
        *({"server": t.name, **summarize(s)} for t, s in zip(targets, samples, strict=True)),
    ]


def tool_round_spans(stamps: str) -> list[dict[str, int]]:
    """For each stamped turn of one tool round (``TOOL_ROUND``), in nanoseconds: ``tool``, the governed tool
    call; ``baton``, baton's share of the round; ``loop``, pydantic-ai's steps in it."""
    spans = []
    for line in stamps.splitlines():
        record = json.loads(line)
        if [point for point, _ in record] != list(TOOL_ROUND):
            continue  # a turn without tools (the plain spawns)
        at = [ns for _, ns in record]
        asked_recorded = at[4] - at[3]  # provider_model< → governed_model<: the model call recorded
        tool = at[6] - at[5]  # tool> → tool<
        next_prepared = at[8] - at[7]  # governed_model> → provider_model>: the next call prepared
        loop = (at[5] - at[4]) + (at[7] - at[6])  # governed_model< → tool>, tool< → governed_model>
        spans.append({"tool": tool, "baton": asked_recorded + tool + next_prepared, "loop": loop})
    return spans


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


def agent_loop_floor_ns(model: Any, iterations: int) -> list[int]:
    """pydantic-ai's Agent loop alone, in a child process, against ``model``: per timed run, the interval
    from the answer asking for the no-op tool handed to the socket to the request carrying its result read."""
    warmup = min(WARMUP_FLOOR, iterations * 10)
    sent = len(model.requests)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        "-m",
        "bench.subagent_tools",
        "--agent-loop",
        model.base_url,
        str(warmup + iterations),
    ]
    subprocess.run(command, env=env, cwd=ROOT, check=True, timeout=600, stdout=subprocess.DEVNULL)
    mine = [r for r in model.requests[sent:] if LOOP_MARKER in json.dumps(r.body)]
    return tool_intervals_ns(mine)[-iterations:]


async def agent_loop_runs(base_url: str, runs: int) -> None:
    """The child's side of :func:`agent_loop_floor_ns`: ``runs`` Agent runs of one tool round each, shaped as
    a governed subagent's turn (its system prompt, a ``demo__echo`` tool, the same output cap)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from baton.subagents.context import subagent_system_prompt

    model = OpenAIChatModel("bench-model", provider=OpenAIProvider(base_url=base_url, api_key="bench"))
    agent = Agent(
        model, system_prompt=subagent_system_prompt("assistant", ""), model_settings={"max_tokens": 256}
    )

    @agent.tool_plain(name="demo__echo")
    async def echo(text: str) -> dict[str, Any]:
        """Echo the text (a no-op: no gateway, no receipt; async, as baton's toolset is, so no thread hop)."""
        return {"success": True, "text": text, "adapter_id": "demo"}

    for _ in range(runs):
        result = await agent.run(f"{LOOP_MARKER} call echo")
        if result.output != "done":
            raise RuntimeError(f"the agent loop floor's run answered {result.output!r}")


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
    if sys.argv[1:2] == ["--agent-loop"]:  # the child process of agent_loop_floor_ns
        asyncio.run(agent_loop_runs(sys.argv[2], int(sys.argv[3])))
    else:
        print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100), indent=2))
