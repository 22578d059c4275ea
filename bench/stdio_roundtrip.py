"""Item 1: a cheap tool call's round trip over stdio, baton against the floor and its peers.

Every server gets the same raw client (one JSON line written, lines read until the answer), so the
client's cost is equal and small; the ratios compare the servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any, Protocol

from bench._common import PipeClient, baton_env, ratio, summarize, temp_home, timed_ns
from bench._peers import Target, smoke, stdio_targets

WARMUP = 200
#: Calls per server before moving to the next one; interleaving spreads the machine's noise evenly.
BLOCK = 50


def start(target: Target, stack: ExitStack) -> PipeClient:
    """Start a target (its own ``BATON_HOME`` for baton) without waiting for it."""
    env = baton_env(stack.enter_context(temp_home())) if target.is_baton else None
    return stack.enter_context(PipeClient(target.command, env))


class Caller(Protocol):
    """Anything that sends one request and returns its result (the pipe and the HTTP clients)."""

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request, one result."""
        ...


def call_block(client: Caller, target: Target, count: int, samples: list[int]) -> None:
    """``count`` timed calls of the target's cheap tool."""
    params = {"name": target.tool, "arguments": target.arguments}
    for _ in range(count):
        started = timed_ns()
        result = client.call("tools/call", params)
        samples.append(timed_ns() - started)
    if result.get("isError"):
        raise RuntimeError(f"{target.name}: {target.tool} failed: {result}")


def measure_all(targets: list[Target], iterations: int) -> list[dict[str, Any]]:
    """All targets running at once, called in interleaved blocks after a warm-up of each."""
    with ExitStack() as stack:
        clients = [start(target, stack) for target in targets]  # they boot in parallel
        for client in clients:
            client.initialize()
            client.call("tools/list")
        return interleave(clients, targets, iterations)


def interleave(clients: Sequence[Caller], targets: list[Target], iterations: int) -> list[dict[str, Any]]:
    """Warm each client up, then time ``iterations`` calls of each in alternating blocks."""
    for client, target in zip(clients, targets, strict=True):
        call_block(client, target, min(WARMUP, iterations * 10), [])
    samples: list[list[int]] = [[] for _ in targets]
    done = 0
    while done < iterations:
        count = min(BLOCK, iterations - done)
        for client, target, bucket in zip(clients, targets, samples, strict=True):
            call_block(client, target, count, bucket)
        done += count
    return [{"server": t.name, **summarize(s)} for t, s in zip(targets, samples, strict=True)]


def run(iterations: int) -> dict[str, Any]:
    """Measure every stdio target; ratios are against the floor and against MCPServer."""
    return with_ratios(
        measure_all(smoke(stdio_targets(), iterations), iterations), "stdio tool-call round trip"
    )


def with_ratios(rows: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """Add p50/p99 ratios against the floor (when measured) and against the SDK's MCPServer."""
    by_name = {row["server"]: row for row in rows}
    floor = by_name.get("floor (hand-written JSON-RPC)")
    mcpserver = by_name["mcp MCPServer"]
    for row in rows:
        if floor:
            row["p50_vs_floor"] = ratio(row["p50_us"], floor["p50_us"])
        row["p50_vs_mcpserver"] = ratio(row["p50_us"], mcpserver["p50_us"])
        row["p99_vs_mcpserver"] = ratio(row["p99_us"], mcpserver["p99_us"])
    targets = []
    # issue 28's bounds: the cheap call with its receipt, and the pending list (one store read more)
    for name, bound in (("baton mcp_ping", 1.25), ("baton mcp_list_pending_requests", 1.5)):
        if name not in by_name:
            continue
        value = by_name[name]["p50_vs_mcpserver"]
        targets.append(
            {
                "what": f"{title}: {name} p50 (receipt write included) <= {bound}x MCPServer",
                "value": value,
                "met": value is not None and value <= bound,
            }
        )
    return {"title": title, "rows": rows, "targets": targets}
