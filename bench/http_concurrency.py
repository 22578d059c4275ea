"""Streamable HTTP under concurrency: c = 1, 8 and 32 clients at once, each with its own MCP session.

Every server of ``bench/http_roundtrip.py`` (the SDK's ``MCPServer`` and low-level ``Server``, FastMCP
and ``baton serve --http`` with its tool-call receipt) runs at once; one asyncio client process drives
them. For each concurrency ``c`` the calls are made in rounds, and in each round every server gets one
block of calls from ``c`` workers (each worker: its own ``httpx.AsyncClient`` connection and session,
calling the cheap tool back to back), so the machine's noise falls on all servers alike. The order of the
servers is reversed every other round, and the client waits ``SETTLE_SECONDS`` after each block, so that
no block runs beside the work another server still does after its own block (its collector, its closing
streams): with a fixed order each server always followed the same neighbour.

Per server and ``c``: throughput (calls per second of the server's own blocks), p50, p95 and p99 of a
call, the server process's CPU per call (its user and system time over its blocks and the settle after
each, the steadier figure), and ``rps_vs_mcpserver`` / ``p50_vs_mcpserver`` / ``cpu_vs_mcpserver``
against MCPServer measured in the same rounds.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from contextlib import ExitStack, suppress
from typing import Any

import httpx

from bench._common import INITIALIZE_PARAMS, PROTOCOL_VERSION, cpu_ms, ratio, request, timed_ns
from bench._peers import Target, http_targets, smoke
from bench.http_roundtrip import free_port, start, wait_listening

LEVELS = (1, 8, 32)
ROUNDS = 20
#: A block gives each worker at least this many calls, so that its start and its tail (the last workers
#: finishing alone) are a small part of it.
CALLS_PER_WORKER = 5
#: The pause after each block, outside every timed window.
SETTLE_SECONDS = 0.1


class AsyncSession:
    """One MCP session over streamable HTTP on its own connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient(timeout=120.0, limits=httpx.Limits(max_connections=1))
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        self.next_id = 0

    async def post(self, message: dict[str, Any]) -> httpx.Response:
        """One POST with the session headers."""
        response = await self.http.post(self.url, content=json.dumps(message), headers=self.headers)
        response.raise_for_status()
        return response

    async def initialize(self) -> None:
        """initialize (keeping the session id), then notifications/initialized."""
        self.next_id += 1
        response = await self.post(request("initialize", INITIALIZE_PARAMS, self.next_id))
        if response.headers.get("mcp-session-id"):
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = PROTOCOL_VERSION
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, target: Target) -> None:
        """One call of the target's cheap tool; a JSON-RPC or tool error fails the benchmark."""
        self.next_id += 1
        params = {"name": target.tool, "arguments": target.arguments}
        response = await self.post(request("tools/call", params, self.next_id))
        if response.headers.get("content-type", "").startswith("application/json"):
            message = response.json()
        else:
            message = next(
                json.loads(line[5:])
                for line in response.text.splitlines()
                if line.startswith("data:") and '"id"' in line
            )
        if "error" in message or message["result"].get("isError"):
            raise RuntimeError(f"{target.name}: {target.tool} failed: {message}")

    async def close(self) -> None:
        """End the session and the connection."""
        if "mcp-session-id" in self.headers:
            with suppress(httpx.HTTPError):
                await self.http.delete(self.url, headers=self.headers)
        await self.http.aclose()


async def block(sessions: list[AsyncSession], target: Target, calls: int, samples: list[int]) -> int:
    """``calls`` calls spread over the sessions, all at once; returns the block's wall time in ns."""
    share = [calls // len(sessions) + (1 if i < calls % len(sessions) else 0) for i in range(len(sessions))]

    async def worker(session: AsyncSession, count: int) -> None:
        for _ in range(count):
            started = timed_ns()
            try:
                await session.call(target)
            except (httpx.ReadError, httpx.RemoteProtocolError):
                # the server closed the kept-alive connection while other servers' blocks ran (uvicorn's
                # keep-alive is 5 s); the read-only call is made again on a new connection and only that
                # attempt is timed
                started = timed_ns()
                await session.call(target)
            samples.append(timed_ns() - started)

    started = timed_ns()
    await asyncio.gather(*(worker(s, n) for s, n in zip(sessions, share, strict=True) if n))
    return timed_ns() - started


def percentile(ordered: list[int], fraction: float) -> float:
    """The ``fraction`` percentile of sorted nanoseconds, in microseconds."""
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] / 1000


async def measure(
    targets: list[Target], pids: list[int], iterations: int, levels: tuple[int, ...]
) -> list[dict[str, Any]]:
    """Each level: sessions opened for every server, then rounds of one block per server, the order
    reversed every other round."""
    rows: list[dict[str, Any]] = []
    for c in levels:
        full = iterations > 1
        per_block = max(CALLS_PER_WORKER * c, iterations // ROUNDS) if full else c
        rounds = ROUNDS if full else 1
        pools = []
        for target in targets:
            sessions = [AsyncSession(f"http://127.0.0.1:{target.port}/mcp") for _ in range(c)]
            await asyncio.gather(*(s.initialize() for s in sessions))
            await block(sessions, target, 2 * c, [])  # warm-up: every connection has made a call
            pools.append(sessions)
        samples: list[list[int]] = [[] for _ in targets]
        wall = [0 for _ in targets]
        cpu = [0.0 for _ in targets]
        for number in range(rounds):
            order = range(len(targets)) if number % 2 == 0 else reversed(range(len(targets)))
            for index in order:
                before = cpu_ms(pids[index])
                wall[index] += await block(pools[index], targets[index], per_block, samples[index])
                await asyncio.sleep(SETTLE_SECONDS)
                cpu[index] += cpu_ms(pids[index]) - before
        for sessions in pools:
            await asyncio.gather(*(s.close() for s in sessions))
        for target, taken, elapsed, spent in zip(targets, samples, wall, cpu, strict=True):
            ordered = sorted(taken)
            rows.append(
                {
                    "server": target.name,
                    "c": c,
                    "n": len(ordered),
                    "rps": round(len(ordered) / (elapsed / 1e9), 1),
                    "p50_us": statistics.median(ordered) / 1000,
                    "p95_us": percentile(ordered, 0.95),
                    "p99_us": percentile(ordered, 0.99),
                    "cpu_us_per_call": round(spent * 1000 / len(ordered), 1),
                }
            )
    for row in rows:
        reference = next(r for r in rows if r["c"] == row["c"] and r["server"] == "mcp MCPServer")
        row["rps_vs_mcpserver"] = ratio(row["rps"], reference["rps"])
        row["p50_vs_mcpserver"] = ratio(row["p50_us"], reference["p50_us"])
        row["p99_vs_mcpserver"] = ratio(row["p99_us"], reference["p99_us"])
        row["cpu_vs_mcpserver"] = ratio(row["cpu_us_per_call"], reference["cpu_us_per_call"])
    return rows


def run(iterations: int) -> dict[str, Any]:
    """All HTTP servers at once, c = 1, 8, 32 (the smoke: c = 1 and 8, MCPServer and baton)."""
    targets = smoke(http_targets(free_port), iterations)
    levels = LEVELS if iterations > 1 else (1, 8)
    with ExitStack() as stack:
        processes = [start(target, stack) for target in targets]
        for target, process in zip(targets, processes, strict=True):
            wait_listening(target.port, process)
        rows = asyncio.run(measure(targets, [p.pid for p in processes], iterations, levels))
    top = max(levels)
    baton = next(r for r in rows if r["c"] == top and r["server"] == "baton mcp_ping")
    return {
        "title": "streamable HTTP under concurrency (c clients at once, each its own session)",
        "rows": rows,
        "targets": [
            {
                "what": f"streamable HTTP at c = {top}: baton's throughput >= 1.0x MCPServer's (receipts included)",
                "value": baton["rps_vs_mcpserver"],
                "met": baton["rps_vs_mcpserver"] is not None and baton["rps_vs_mcpserver"] >= 1.0,
            }
        ],
    }


if __name__ == "__main__":
    import sys

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 1000), indent=2))
