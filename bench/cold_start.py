"""Item 3: cold start, from spawning the process to reading its initialize response.

Spawns alternate between the servers so the machine's noise falls on all of them alike. baton keeps
one ``BATON_HOME`` across its spawns (the store exists, as on every start but the first).
"""

from __future__ import annotations

import statistics
from contextlib import ExitStack
from typing import Any

from bench._common import PipeClient, baton_command, baton_env, peer_command, ratio, temp_home, timed_ns

SERVERS: dict[str, list[str]] = {
    "floor (hand-written JSON-RPC)": peer_command("floor_server.py"),
    "mcp low-level Server": peer_command("lowlevel_server.py"),
    "mcp MCPServer": peer_command("mcpserver_server.py"),
    "baton serve": baton_command(),
}

#: The one-iteration smoke spawns only what the target's ratio needs.
SMOKE = ("mcp MCPServer", "baton serve")


def spawn_once(command: list[str], env: dict[str, str] | None) -> int:
    """Nanoseconds from spawn to the initialize response."""
    started = timed_ns()
    with PipeClient(command, env) as client:
        client.initialize()
        return timed_ns() - started


def run(iterations: int) -> dict[str, Any]:
    """Median and worst of ``iterations`` spawns of each server; ratios against MCPServer."""
    servers = {k: v for k, v in SERVERS.items() if iterations > 1 or k in SMOKE}
    samples: dict[str, list[int]] = {name: [] for name in servers}
    with ExitStack() as stack:
        env = baton_env(stack.enter_context(temp_home()))
        if iterations > 1:
            spawn_once(SERVERS["baton serve"], env)  # creates the store; not counted
        for _ in range(iterations):
            for name, command in servers.items():
                samples[name].append(spawn_once(command, env if name == "baton serve" else None))
    reference = statistics.median(samples["mcp MCPServer"]) / 1e6
    rows = []
    for name, values in samples.items():
        median_ms = statistics.median(values) / 1e6
        rows.append(
            {
                "server": name,
                "n": len(values),
                "median_ms": round(median_ms, 1),
                "max_ms": round(max(values) / 1e6, 1),
                "median_vs_mcpserver": ratio(median_ms, reference),
            }
        )
    baton = rows[-1]["median_vs_mcpserver"]
    return {
        "title": "cold start (spawn → initialize response)",
        "rows": rows,
        "target": {
            "what": "baton cold start median <= 1.0x MCPServer",
            "value": baton,
            "met": baton is not None and baton <= 1.0,
        },
    }
