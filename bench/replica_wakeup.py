"""Cross-replica wake-up: an approval waiting on replica A, decided on replica B, over one PostgreSQL.

Each "replica" is a separate runtime (its own engine, connection pool and LISTEN connection) on a
throwaway PostgreSQL server; B's decision reaches A through ``NOTIFY``. The same measurement over
SQLite, where only the 0.2 s store poll can carry it, is the reference.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import baton  # noqa: F401
except ImportError:  # a plain checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import anyio

from baton.config import load_settings
from baton.hitl.broker import get_broker
from baton.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hitl_wakeup import _wakeup


async def _measure(url: str, home: Path, iterations: int) -> list[float]:
    settings = load_settings({"BATON_HOME": str(home), "BATON_DATABASE_URL": url})
    replica_a, replica_b = Runtime.open(settings), Runtime.open(settings)
    try:
        waiting, deciding = get_broker(replica_a), get_broker(replica_b)
        await _wakeup(waiting, deciding, 1)  # warm-up: A's LISTEN connection comes up with its first waiter
        return await _wakeup(waiting, deciding, iterations)
    finally:
        from baton.store.signals import signals_for

        for replica in (replica_a, replica_b):
            await signals_for(replica).aclose()
            replica.close()


def _row(name: str, samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "path": name,
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000, 2),
    }


def run(iterations: int) -> dict[str, Any]:
    """Median and p99 decision-to-wakeup across two replicas on PostgreSQL (and on SQLite for reference)."""
    from baton.testing.postgres import TemporaryPostgres, find_bin_dir

    if find_bin_dir() is None:
        return {"title": "cross-replica wake-up", "skipped": "PostgreSQL is not installed"}
    count = max(3, iterations)
    with tempfile.TemporaryDirectory(prefix="baton-bench-replicas-") as home, TemporaryPostgres() as pg:
        postgres = anyio.run(_measure, pg.url, Path(home), count)
        sqlite = anyio.run(
            _measure, f"sqlite:///{Path(home) / 'baton.db'}", Path(home), max(3, min(count, 20))
        )
    rows = [
        _row("PostgreSQL LISTEN/NOTIFY (two replicas)", postgres),
        _row("SQLite store poll (reference)", sqlite),
    ]
    return {
        "title": "cross-replica wake-up (decision on B → waiter on A)",
        "iterations": count,
        "rows": rows,
        "target": {
            "what": "cross-replica wake-up median < 5 ms",
            "value": rows[0]["median_ms"],
            "met": rows[0]["median_ms"] < 5,
        },
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100), indent=2))
