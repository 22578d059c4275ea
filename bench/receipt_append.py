"""The receipt append alone: redaction, canonical JSON, the hash chain and the insert, on SQLite.

Two writers on two stores of the same schema (baton's own migrations), in one process, interleaved in
blocks so the machine's noise falls on both alike:

- ``sqlite3 insert (floor)``: the stdlib driver writes the same finished row (payload text and hashes
  computed beforehand) in its own ``BEGIN IMMEDIATE`` … ``COMMIT``: what one durable row costs at least;
- ``baton ReceiptLog.append``: a ``tool_call`` payload as the server writes it, through the real
  ``ReceiptLog`` (redactor with configured secrets, credential guard, head lock, chain hash, insert,
  head update, commit).

``append_vs_sqlite_insert`` is baton's p50 over the floor's p50; the target is an absolute bound
(≤ 150 µs p50 per append), reported beside the ratio.
Run: ``PYTHONPATH=src python -m bench.receipt_append [ITERATIONS]``.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._common import ratio, summarize, timed_ns

WARMUP = 200
BLOCK = 50
TARGET_US = 150.0


def tool_call_payload(index: int) -> dict[str, Any]:
    """A ``tool_call`` receipt's payload, shaped as ``ToolRegistry._receipt`` writes it."""
    return {
        "tool": "mcp_ping",
        "agent": "stdio",
        "arguments_sha256": f"{index:064x}",
        "success": True,
        "error_class": None,
        "duration_seconds": 0.000123,
    }


def run(iterations: int) -> dict[str, Any]:
    """Time ``iterations`` appends of each writer; p50 in µs and as a ratio to the bare insert."""
    from baton.evidence.canonical import canonical_json, utc_now
    from baton.evidence.receipts import ReceiptLog
    from baton.evidence.redaction import Redactor
    from baton.store.engine import Store

    with tempfile.TemporaryDirectory(prefix="baton-bench-receipts-") as tmp:
        baton_store = Store(f"sqlite:///{Path(tmp) / 'baton.db'}")
        floor_store = Store(f"sqlite:///{Path(tmp) / 'floor.db'}")  # same schema and indexes
        floor_store.dispose()
        log = ReceiptLog(baton_store, Redactor(("a-configured-secret-value", "0")))
        floor = sqlite3.connect(Path(tmp) / "floor.db", isolation_level=None)
        floor.execute("PRAGMA journal_mode=WAL")
        floor.execute("PRAGMA synchronous=NORMAL")
        insert = (
            "INSERT INTO receipts (seq, kind, at, payload, prev_sha256, sha256) VALUES (?, ?, ?, ?, ?, ?)"
        )
        floor_seq = [0]

        def floor_append() -> None:
            floor_seq[0] += 1
            seq = floor_seq[0]
            row = (
                seq,
                "tool_call",
                utc_now(),
                canonical_json(tool_call_payload(seq)),
                "0" * 64,
                f"{seq:064x}",
            )
            started = timed_ns()
            floor.execute("BEGIN IMMEDIATE")
            floor.execute(insert, row)
            floor.execute("COMMIT")
            samples[0].append(timed_ns() - started)

        def baton_append() -> None:
            payload = tool_call_payload(len(samples[1]))
            started = timed_ns()
            log.append("tool_call", payload)
            samples[1].append(timed_ns() - started)

        samples: list[list[int]] = [[], []]
        for _ in range(min(WARMUP, iterations * 10)):
            floor_append()
            baton_append()
        samples = [[], []]
        done = 0
        while done < iterations:
            count = min(BLOCK, iterations - done)
            for _ in range(count):
                floor_append()
            for _ in range(count):
                baton_append()
            done += count
        verdict = log.verify()
        floor.close()
        baton_store.dispose()
        if not verdict.ok:
            raise RuntimeError(f"the benchmark's chain does not verify: {verdict}")
    rows = [
        {"writer": "sqlite3 insert (floor)", **summarize(samples[0])},
        {"writer": "baton ReceiptLog.append", **summarize(samples[1])},
    ]
    floor_p50 = rows[0]["p50_us"]
    for row in rows:
        row["p50_vs_sqlite_insert"] = ratio(row["p50_us"], floor_p50)
    baton = rows[1]
    return {
        "title": "receipt append (redact, canonical JSON, hash chain, insert, commit) on SQLite",
        "rows": rows,
        "append_vs_sqlite_insert": baton["p50_vs_sqlite_insert"],
        "targets": [
            {
                "what": f"receipt append p50 <= {TARGET_US:.0f} µs on SQLite "
                f"({baton['p50_vs_sqlite_insert']}x the bare sqlite3 insert in the same run)",
                "value": round(baton["p50_us"], 1),
                "met": baton["p50_us"] <= TARGET_US,
            }
        ],
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5000), indent=2))
