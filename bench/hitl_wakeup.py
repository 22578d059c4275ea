"""Human-in-the-loop latency: decision-to-wakeup in one process (event) and across processes (store poll),
and ``list_pending`` with 1,000 pending requests.

Run as ``python bench/hitl_wakeup.py [ITERATIONS]``; ``run(iterations)`` is what ``bench/run`` calls.
Results go to ``bench/results/hitl.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import baton  # noqa: F401
except ImportError:  # a plain checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import anyio

from baton.config import load_settings
from baton.hitl.broker import Decision, HitlBroker, NewRequest, get_broker
from baton.runtime import Runtime

RESULTS = Path(__file__).resolve().parent / "results" / "hitl.json"


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "count": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


async def _wakeup(waiting: HitlBroker, deciding: HitlBroker, iterations: int) -> list[float]:
    """Seconds from a committed decision to the waiter holding its result."""
    samples: list[float] = []
    for i in range(iterations):
        view = await waiting.create(NewRequest("approval", f"bench {i}", timeout_seconds=60))
        woke: list[float] = []

        async def wait(request_id: str = view["request_id"], into: list[float] = woke) -> None:
            await waiting.wait(request_id)
            into.append(time.perf_counter())

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            while not waiting.waiters.is_waiting(view["request_id"]):
                await anyio.lowlevel.checkpoint()
            deciding.respond(view["request_id"], Decision(approved=True, via="bench"))
            decided = time.perf_counter()
        samples.append(woke[0] - decided)
    return samples


async def _measure(home: Path, iterations: int, pending: int) -> dict[str, Any]:
    settings = load_settings({"BATON_HOME": str(home)})
    runtime, other = Runtime.open(settings), Runtime.open(settings)  # `other` stands for a second process
    try:
        broker = get_broker(runtime)
        in_process = await _wakeup(broker, broker, iterations)
        cross_process = await _wakeup(broker, get_broker(other), max(3, min(iterations, 30)))
        for i in range(pending):
            await broker.create(NewRequest("input", f"pending {i}", {"i": i}, 3600, urgent=i % 10 == 0))
        listing: list[float] = []
        for _ in range(max(5, min(iterations, 50))):
            started = time.perf_counter()
            rows = broker.list_pending()
            listing.append(time.perf_counter() - started)
        assert len(rows) == pending
    finally:
        runtime.close()
        other.close()
    return {
        "benchmark": "hitl_wakeup",
        "wakeup_in_process": _stats(in_process),
        "wakeup_cross_process_poll": _stats(cross_process),
        "list_pending": {**_stats(listing), "pending": pending},
    }


def run(iterations: int, pending: int = 1000) -> dict[str, Any]:
    """Measure on a throwaway BATON_HOME; returns the results (``main`` also prints and saves them)."""
    with tempfile.TemporaryDirectory(prefix="baton-bench-hitl-") as home:
        return anyio.run(_measure, Path(home), iterations, pending)


def table(result: dict[str, Any]) -> str:
    """The results as a small text table."""
    lines = [f"{'measurement':<28}{'n':>6}{'median ms':>12}{'p99 ms':>10}"]
    for key in ("wakeup_in_process", "wakeup_cross_process_poll", "list_pending"):
        row = result[key]
        label = f"{key} ({row['pending']})" if key == "list_pending" else key
        lines.append(f"{label:<28}{row['count']:>6}{row['median_ms']:>12.3f}{row['p99_ms']:>10.3f}")
    return "\n".join(lines)


def main() -> None:
    """Run with ITERATIONS (default 200), print the table, write bench/results/hitl.json."""
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    result = run(iterations)
    print(table(result))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
