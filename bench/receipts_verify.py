"""``baton receipts verify`` at scale: a store of N receipts (1,000,000 in a full run) with a signed
checkpoint every 1,000, verified by a real ``baton receipts verify`` process.

The store is built fast but exactly: each row's payload is the canonical JSON of a tool-call receipt,
its hash is the chain's (checked against ``baton.receipts.receipt_digest`` on the first row), the rows go
in with ``executemany`` in one transaction, and the checkpoints are signed with the home's own key.
The verify process's peak RSS is read from its own rusage (``os.wait4`` in a small launcher, see
``LAUNCHER``), so nothing else this runner started counts; its time includes the CLI's start-up. A second, small store gives the baseline: constant memory means the two peaks match.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

try:
    import baton  # noqa: F401
except ImportError:  # a plain checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from baton.chain_verify import GENESIS_SHA256, canonical
from baton.checkpoints import file_path, load_or_create_key, sign
from baton.config import load_settings
from baton.receipts import receipt_digest
from baton.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import baton_env, temp_home

CHECKPOINT_EVERY = 1000
BATCH = 50_000
BASELINE_RECEIPTS = 1000
TARGET_RSS_MB = 100.0


def build_store(home: Path, count: int) -> float:
    """Write ``count`` chained receipts and their checkpoints into ``home``; returns seconds taken."""
    started = time.perf_counter()
    settings = load_settings(baton_env(home))
    Store(settings.database_url).dispose()  # schema and head row, through baton's own migrations
    key = load_or_create_key(settings)
    checkpoints: list[dict[str, Any]] = []
    at = "2026-01-01T00:00:00.000000+00:00"
    prev = GENESIS_SHA256
    db = sqlite3.connect(home / "baton.db", isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        batch: list[tuple[int, str, str, str, str, str]] = []
        for seq in range(1, count + 1):
            payload = {
                "tool": "mcp_ping",
                "arguments_sha256": hashlib.sha256(str(seq).encode()).hexdigest(),
                "success": True,
                "error_class": None,
                "duration_seconds": 0.000123,
            }
            text = canonical(payload)
            body = f'{{"at":"{at}","kind":"tool_call","payload":{text},"prev_sha256":"{prev}","seq":{seq}}}'
            digest = hashlib.sha256(body.encode()).hexdigest()
            if seq == 1:
                assert digest == receipt_digest(1, "tool_call", at, payload, GENESIS_SHA256)
            batch.append((seq, "tool_call", at, text, prev, digest))
            prev = digest
            if seq % CHECKPOINT_EVERY == 0 or seq == count:
                checkpoints.append(asdict(sign(key, seq, digest)))
            if len(batch) >= BATCH:
                db.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?)", batch)
                batch.clear()
        db.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?)", batch)
        db.execute("UPDATE receipt_head SET seq = ?, sha256 = ? WHERE id = 1", (count, prev))
        db.executemany(
            "INSERT INTO receipt_checkpoints (seq, sha256, at, key_id, signature) VALUES (?, ?, ?, ?, ?)",
            [(c["seq"], c["sha256"], c["at"], c["key_id"], c["signature"]) for c in checkpoints],
        )
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    with file_path(settings).open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(c, sort_keys=True) + "\n" for c in checkpoints)
    return time.perf_counter() - started


#: Runs the command it is given and prints that child's peak RSS (KiB) and exit code. A small launcher
#: is needed because Linux folds the RSS of the process that forks (this runner, large after building
#: the store) into the child's ``ru_maxrss`` at exec; forked from this ~10 MB launcher, the figure is the
#: verify process's own.
LAUNCHER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:])\n"
    "_pid, status, usage = os.wait4(child.pid, 0)\n"
    "sys.stderr.write(f'\\nBENCH_RUSAGE {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}\\n')\n"
)


def verify_once(home: Path) -> tuple[float, float, str]:
    """Run ``baton receipts verify``; returns (seconds, its peak RSS in MB, first line of its output)."""
    command = [sys.executable, "-c", LAUNCHER, sys.executable, "-m", "baton", "receipts", "verify"]
    started = time.perf_counter()
    done = subprocess.run(command, env=baton_env(home), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    marker = done.stderr.rsplit("BENCH_RUSAGE ", 1)[-1].split()
    maxrss_kib, code = int(marker[0]), int(marker[1])
    if code != 0:
        raise RuntimeError(f"receipts verify failed: {(done.stdout + done.stderr)[-500:]}")
    return seconds, maxrss_kib / 1024, done.stdout.strip().splitlines()[0]


def run(iterations: int) -> dict[str, Any]:
    """Build N receipts (``iterations``; at least 1,000) and measure one verify of them and of 1,000."""
    count = max(iterations, BASELINE_RECEIPTS)
    rows = []
    for receipts in sorted({BASELINE_RECEIPTS, count}):
        with temp_home() as home:
            home.mkdir(parents=True)
            build_seconds = build_store(home, receipts)
            seconds, rss_mb, line = verify_once(home)
            size = (home / "baton.db").stat().st_size
            rows.append(
                {
                    "receipts": receipts,
                    "checkpoints": -(-receipts // CHECKPOINT_EVERY),
                    "build_s": round(build_seconds, 1),
                    "verify_s": round(seconds, 2),
                    "receipts_per_s": round(receipts / seconds),
                    "peak_rss_mb": round(rss_mb, 1),
                    "store_bytes_per_receipt": round(size / receipts),
                    "verdict": line[:40],
                }
            )
    largest = rows[-1]
    return {
        "title": "receipts verify (streamed, checkpoints checked) in a separate process",
        "rows": rows,
        "targets": [
            {
                "what": f"receipts verify of {largest['receipts']:,} receipts: peak RSS <= {TARGET_RSS_MB:g} MB",
                "value": f"{largest['peak_rss_mb']} MB in {largest['verify_s']} s",
                "met": largest["peak_rss_mb"] <= TARGET_RSS_MB,
            },
            {
                "what": "constant memory: peak RSS at N within 10 MB of the 1,000-receipt baseline",
                "value": f"{largest['peak_rss_mb']} vs {rows[0]['peak_rss_mb']} MB",
                "met": largest["peak_rss_mb"] - rows[0]["peak_rss_mb"] <= 10,
            },
        ],
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000), indent=2))
