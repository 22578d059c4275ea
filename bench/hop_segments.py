"""Where a proxied tool call's time goes, segment by segment (a diagnostic, not part of ``bench/run``).

N ``tools/call`` requests go one at a time through ``baton serve`` to a live adapter's sandboxed upstream,
set up as ``bench/gateway_proxy.py`` sets it up. The baton process is started by ``bench/peers/hop_stamps.py``,
which wraps the call path's functions in that process only and stamps ``time.perf_counter_ns()`` at each
point; the client stamps its write and its read. The same client then calls the upstream directly (the
same sandboxed command line), in alternating blocks, so the hop (round trip less the direct call) is
measured beside the segments. The wrappers cost a little (a few µs a call): read shares, not totals.

Run: ``PYTHONPATH=src python -m bench.hop_segments [CALLS] [--upstream everything|stdlib] [--steps] [--json]``
(``--steps`` also counts the event loop's callbacks, task steps included, in each segment).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench._common import PipeClient, baton_env, peer_command, temp_home, timed_ns
from bench.gateway_proxy import ECHO, _direct_upstream, _everything_adapter, _remove_tree, _trivial_adapter
from bench.peers.hop_stamps import POINTS as SERVER_POINTS

#: Every stamp of one call, in the order a call passes them: the client's two around the server's own.
POINTS = ("client_write", *SERVER_POINTS, "client_read")

#: What runs between two consecutive stamps.
SEGMENTS = {
    "stdin_read": "pipe to baton, loop wakes, line handed out",
    "sdk_dispatch": "SDK server inbound: parse, relay and handler tasks, middleware",
    "proxy_entry": "baton glue in: loader, CallContext, registry checks",
    "liveness_done": "liveness read (store)",
    "upstream_write": "policy check, SDK client outbound",
    "upstream_data": "upstream: write, pipe, the server's own work, pipe",
    "upstream_read": "loop wakes the session's reader, line parsed",
    "upstream_returned": "SDK client inbound: dispatch, CallToolResult",
    "receipt_committed": "envelope + gateway_call receipt committed",
    "answer_write": "baton glue out, SDK server outbound",
    "client_read": "stdout write, pipe to client, client parse",
}
UPSTREAM_SEGMENT = "upstream_data"
BLOCK = 50


def _calls(client: PipeClient, tool: str, arguments: dict[str, Any], count: int) -> list[tuple[int, int]]:
    """``count`` calls one at a time; the client's (write, read) stamps of each."""
    params = {"name": tool, "arguments": arguments}
    stamps = []
    for _ in range(count):
        written = timed_ns()
        client.send("tools/call", params)
        answer = client.receive()
        stamps.append((written, timed_ns()))
        if "error" in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{tool} failed: {answer}")
    return stamps


def collect(
    home: Path,
    adapter_id: str,
    tool: str,
    arguments: dict[str, Any],
    calls: int,
    warmup: int,
    steps: bool = False,
) -> tuple[list[dict[str, int]], list[int]]:
    """Every stamp of ``calls`` proxied calls (after ``warmup``), and as many direct calls' round trips."""
    with ExitStack() as stack:
        upstream, made = _direct_upstream(home, adapter_id)
        stack.callback(_remove_tree, made)
        stamps_file = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="baton-hop-"))) / "stamps"
        baton = stack.enter_context(
            PipeClient(
                peer_command("hop_stamps.py", str(stamps_file), *(["--steps"] if steps else [])),
                baton_env(home),
            )
        )
        direct = stack.enter_context(PipeClient(upstream))
        for client in (baton, direct):
            client.initialize()
            client.call("tools/list")
        proxied_name = f"{adapter_id}__{tool}"
        client_stamps = _calls(baton, proxied_name, arguments, warmup)
        _calls(direct, tool, arguments, warmup)
        direct_ns: list[int] = []
        done = 0
        while done < calls:
            count = min(BLOCK, calls - done)
            client_stamps += _calls(baton, proxied_name, arguments, count)
            direct_ns += [read - written for written, read in _calls(direct, tool, arguments, count)]
            done += count
        baton.close()  # the records are on disk once each answer was written; closing ends the process
        lines = stamps_file.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    if len(records) != len(client_stamps):
        raise RuntimeError(f"{len(records)} stamp records for {len(client_stamps)} calls")
    for record, (written, read) in zip(records, client_stamps, strict=True):
        record["client_write"], record["client_read"] = written, read
    return records[warmup:], direct_ns


def table(records: list[dict[str, int]], direct_ns: list[int]) -> dict[str, Any]:
    """Per-segment p50 and mean (µs); the p50's share of the round trip and of the hop (all but the upstream)."""
    rows = []
    for before, after in itertools.pairwise(POINTS):
        spans = [r[after] - r[before] for r in records]
        rows.append(
            {
                "segment": f"{before} → {after}",
                "what": SEGMENTS[after],
                "p50_us": round(statistics.median(spans) / 1000, 1),
                "mean_us": round(statistics.fmean(spans) / 1000, 1),
            }
        )
        if f"{after}#steps" in records[0] and f"{before}#steps" in records[0]:
            rows[-1]["loop_steps_p50"] = statistics.median(
                r[f"{after}#steps"] - r[f"{before}#steps"] for r in records
            )
    round_trip = statistics.median(r["client_read"] - r["client_write"] for r in records) / 1000
    direct = statistics.median(direct_ns) / 1000
    summed = sum(row["p50_us"] for row in rows)
    hop_sum = sum(
        row["p50_us"] for row, after in zip(rows, POINTS[1:], strict=True) if after != UPSTREAM_SEGMENT
    )
    for row, after in zip(rows, POINTS[1:], strict=True):
        row["share_of_round_trip"] = round(row["p50_us"] / summed, 3)
        row["share_of_hop"] = None if after == UPSTREAM_SEGMENT else round(row["p50_us"] / hop_sum, 3)
    return {
        "calls": len(records),
        "round_trip_p50_us": round(round_trip, 1),
        "direct_p50_us": round(direct, 1),
        "hop_p50_added_us": round(round_trip - direct, 1),
        "segments": rows,
    }


def run(calls: int, upstream: str = "everything", warmup: int = 100, steps: bool = False) -> dict[str, Any]:
    """Set the adapter up in a throwaway home, stamp ``calls`` calls and tabulate them."""
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox

    reason = BubblewrapSandbox().unavailable_reason()
    if reason:
        raise RuntimeError(f"bubblewrap is unavailable: {reason}")
    with temp_home() as home:
        if upstream == "stdlib":
            adapter_id, arguments = _trivial_adapter(home), ECHO
        else:
            adapter_id, arguments = _everything_adapter(home), {"message": "ping"}
        records, direct_ns = collect(home, adapter_id, "echo", arguments, calls, warmup, steps)
    return {"upstream": upstream, **table(records, direct_ns), "records": records}


def render(result: dict[str, Any]) -> str:
    """The table as text."""
    lines = [
        f"{result['calls']} calls to {result['upstream']}: round trip p50 {result['round_trip_p50_us']} µs, "
        f"direct {result['direct_p50_us']} µs, hop +{result['hop_p50_added_us']} µs",
        f"{'segment':42} {'p50 µs':>8} {'mean µs':>8} {'of trip':>8} {'of hop':>7}  what",
    ]
    for row in result["segments"]:
        hop = "" if row["share_of_hop"] is None else f"{row['share_of_hop']:.1%}"
        steps = f"  [{row['loop_steps_p50']:g} loop steps]" if "loop_steps_p50" in row else ""
        lines.append(
            f"{row['segment']:42} {row['p50_us']:8.1f} {row['mean_us']:8.1f} {row['share_of_round_trip']:8.1%} {hop:>7}  "
            f"{row['what']}{steps}"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse the command line, run, print."""
    parser = argparse.ArgumentParser(prog="python -m bench.hop_segments")
    parser.add_argument("calls", nargs="?", type=int, default=1000)
    parser.add_argument("--upstream", choices=("everything", "stdlib"), default="everything")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the table (without records) as JSON")
    parser.add_argument(
        "--steps", action="store_true", help="count the event loop's callbacks per segment (slows the loop)"
    )
    args = parser.parse_args()
    result = run(args.calls, args.upstream, args.warmup, args.steps)
    result.pop("records")
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
