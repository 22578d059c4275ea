"""Item 3: cold start, from spawning the process to its initialize response and to its first tools/list.

Every client lists tools right after the handshake, so the time to tools (spawn → initialize →
notifications/initialized → tools/list answered) is what a user waits for; initialize alone is kept too.

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


def spawn_once(command: list[str], env: dict[str, str] | None) -> tuple[int, int]:
    """Nanoseconds from spawn to the initialize response, and to the first tools/list response."""
    started = timed_ns()
    with PipeClient(command, env) as client:
        client.initialize()
        initialized = timed_ns() - started
        client.call("tools/list")
        return initialized, timed_ns() - started


def run(iterations: int) -> dict[str, Any]:
    """Median and worst of ``iterations`` spawns of each server; ratios against MCPServer."""
    servers = {k: v for k, v in SERVERS.items() if iterations > 1 or k in SMOKE}
    samples: dict[str, list[tuple[int, int]]] = {name: [] for name in servers}
    with ExitStack() as stack:
        env = baton_env(stack.enter_context(temp_home()))
        if iterations > 1:
            spawn_once(SERVERS["baton serve"], env)  # creates the store; not counted
        for _ in range(iterations):
            for name, command in servers.items():
                samples[name].append(spawn_once(command, env if name == "baton serve" else None))
    init_reference = statistics.median(s[0] for s in samples["mcp MCPServer"]) / 1e6
    tools_reference = statistics.median(s[1] for s in samples["mcp MCPServer"]) / 1e6
    rows = []
    for name, values in samples.items():
        init_ms = statistics.median(s[0] for s in values) / 1e6
        tools_ms = statistics.median(s[1] for s in values) / 1e6
        rows.append(
            {
                "server": name,
                "n": len(values),
                "initialize_median_ms": round(init_ms, 1),
                "initialize_vs_mcpserver": ratio(init_ms, init_reference),
                "tools_median_ms": round(tools_ms, 1),
                "tools_max_ms": round(max(s[1] for s in values) / 1e6, 1),
                "tools_vs_mcpserver": ratio(tools_ms, tools_reference),
            }
        )
    baton = rows[-1]
    return {
        "title": "cold start (spawn → initialize response → first tools/list response)",
        "rows": rows,
        "targets": [
            {
                "what": "time to tools (spawn → first tools/list answer) median <= 1.0x MCPServer",
                "value": baton["tools_vs_mcpserver"],
                "met": baton["tools_vs_mcpserver"] is not None and baton["tools_vs_mcpserver"] <= 1.0,
            },
            {
                "what": "initialize median <= 1.0x MCPServer",
                "value": baton["initialize_vs_mcpserver"],
                "met": baton["initialize_vs_mcpserver"] is not None
                and baton["initialize_vs_mcpserver"] <= 1.0,
            },
        ],
    }
