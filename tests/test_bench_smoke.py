"""``bench/run --quick`` still runs every benchmark end to end (one iteration each; no timing asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(590)  # a hang guard, not a margin: busy CI machines run this slowly
def test_bench_run_quick_measures_every_benchmark_and_writes_json(tmp_path: Path) -> None:
    output = tmp_path / "quick.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run"), "--quick", "--output", str(output)],
        capture_output=True,
        text=True,
        env=env,
        timeout=580,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = json.loads(output.read_text())
    assert report["smoke"] is True
    assert {"cpu", "cores", "python", "mcp"} <= set(report["machine"])
    benchmarks = report["benchmarks"]
    for name in (
        "stdio_roundtrip",
        "http_roundtrip",
        "http_concurrency",
        "cold_start",
        "first_model_call",
        "fanout",
        "chat_body",
    ):
        assert "error" not in benchmarks[name], benchmarks[name]
        assert benchmarks[name]["rows"], name
    # every server's CPU is read over its own blocks, beside its throughput
    for row in benchmarks["http_concurrency"]["rows"]:
        assert row["cpu_us_per_call"] >= 0 and row["rps"] > 0, row
    stdio = {row["server"]: row for row in benchmarks["stdio_roundtrip"]["rows"]}
    baton, mcpserver = stdio["baton mcp_ping"], stdio["mcp MCPServer"]
    assert baton["p50_us"] > 0 and mcpserver["p50_us"] > 0
    # baton is compared with the SDK's server (another process, another measurement), not with itself
    assert baton["p50_vs_mcpserver"] == pytest.approx(baton["p50_us"] / mcpserver["p50_us"], abs=1e-3)
    ping_target = next(t for t in benchmarks["stdio_roundtrip"]["targets"] if "mcp_ping" in t["what"])
    assert ping_target["value"] == baton["p50_vs_mcpserver"]
    assert baton["p50_vs_floor"] > 0
    fanout = benchmarks["fanout"]["rows"][0]
    assert fanout["failed"] == 0
    # the stack's CPU floor is the bare model client's request plus the SDK server's tools/call, both measured
    assert fanout["cpu_floor_ms_per_subagent"] == pytest.approx(
        fanout["direct_aiohttp_cpu_ms_per_request"] + fanout["sdk_server_cpu_ms_per_call"], abs=0.011
    )
    # one step inside the client's floor, timed alone (None only when the SDK drops its private helper)
    assert fanout["openai_transform_ms"] is None or fanout["openai_transform_ms"] > 0
    governed = benchmarks["subagent_tools"]
    if "skipped" not in governed:  # bubblewrap is there: the loop floor is measured beside the governed call
        assert governed["agent_loop_floor_us"] > 0
        assert governed["governed_call_less_loop_vs_direct"] == pytest.approx(
            (governed["governed_call_us"] - governed["agent_loop_floor_us"]) / governed["direct_us"], abs=1e-2
        )
        # the stamped tool round: the tool call is inside baton's share of the round
        assert 0 < governed["governed_tool_call_us"] < governed["baton_round_us"]
        assert governed["governed_tool_call_vs_direct"] == governed["targets"][0]["value"]
    assert "mcp_ping" in completed.stdout


@pytest.mark.slow
@pytest.mark.needs("bwrap")
@pytest.mark.timeout(300)  # a hang guard: the adapter is locked, replayed and promoted first
def test_hop_segments_stamps_every_point_of_each_proxied_call_in_order() -> None:
    from bench.hop_segments import POINTS, run

    result = run(4, upstream="stdlib", warmup=2)
    records = result["records"]
    assert len(records) == 4
    for record in records:
        assert set(record) == set(POINTS), sorted(set(POINTS) ^ set(record))
        stamps = [record[point] for point in POINTS]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), record
    assert [row["segment"].split(" → ")[1] for row in result["segments"]] == list(POINTS[1:])
    assert result["round_trip_p50_us"] > 0 and result["direct_p50_us"] > 0
