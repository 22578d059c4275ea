"""A governed tool call inside a subagent vs the agent calling the same adapter tool directly, in one run.

One ``baton serve`` (over the same raw pipe client as every benchmark) with the stdlib test server live as
adapter ``demo`` in a bubblewrap sandbox, and the loopback model (``FakeLLMServer``) in this process.
Three calls are timed, interleaved on that one server:

- ``direct``: the agent calls ``demo__echo`` (policy, sandboxed upstream, receipt);
- ``plain spawn``: a sync ``mcp_spawn_subagent`` without tools (one model call);
- ``spawn + tool``: the same spawn with ``tools=["demo__echo"]``, whose model asks for ``demo__echo``
  once and then answers (two model calls and one governed tool call, through pydantic-ai's loop).

``governed_extra_vs_direct`` = (p50 spawn + tool - p50 plain spawn) / p50 direct: what one governed
tool call adds to a subagent's turn (the call itself plus the one extra loopback model round trip it
needs), in units of the agent's own direct call.
Run: ``PYTHONPATH=src python -m bench.subagent_tools [ITERATIONS]``.
"""

from __future__ import annotations

import sys
from typing import Any

from bench._common import PipeClient, baton_command, baton_env, ratio, temp_home
from bench._peers import Target
from bench.gateway_proxy import _trivial_adapter
from bench.stdio_roundtrip import interleave


def run(iterations: int) -> dict[str, Any]:
    """The three calls on one server; the governed tool call's extra as a ratio of the direct call."""
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
    direct, plain, governed = rows
    extra_us = governed["p50_us"] - plain["p50_us"]
    for row in rows:
        row["p50_vs_direct"] = ratio(row["p50_us"], direct["p50_us"])
    value = ratio(extra_us, direct["p50_us"])
    return {
        "title": "governed tool call inside a subagent vs the agent's direct call",
        "rows": rows,
        "governed_extra_us": round(extra_us, 1),
        "governed_extra_vs_direct": value,
        "targets": [
            {
                "what": "subagent tools: one governed tool call adds <= 1.2x the agent's direct call "
                "(including its extra loopback model round trip)",
                "value": value,
                "met": value <= 1.2 if value is not None else None,
            }
        ],
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100), indent=2))
