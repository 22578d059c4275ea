"""``baton receipts verify`` at scale: a store of N receipts (1,000,000 in a full run) with a signed
checkpoint every 1,000, verified by a real ``baton receipts verify`` process.

The store is built fast but exactly: each row's payload is the canonical JSON of a tool-call receipt,
its hash is the chain's (checked against ``baton.evidence.receipts.receipt_digest`` on the first row), the rows go
in with ``executemany`` in one transaction, and the checkpoints are signed with the home's own key.
The verify process's peak RSS is read from its own rusage (``os.wait4`` in a small launcher, see
``LAUNCHER``), so nothing else this runner started counts; its time includes the CLI's start-up. A second, small store gives the baseline: constant memory means the two peaks match.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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

from sqlalchemy import insert, update

from baton.chain_verify import GENESIS_SHA256, canonical
from baton.config import load_settings
from baton.evidence.checkpoints import file_path, load_or_create_key, sign
from baton.evidence.receipts import receipt_digest
from baton.store.engine import Store
from baton.store.schema import receipt_checkpoints, receipt_head, receipts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import baton_env, temp_home

CHECKPOINT_EVERY = 1000
BATCH = 50_000
BASELINE_RECEIPTS = 1000
TARGET_RSS_MB = 100.0


def build_store(home: Path, count: int, database_url: str | None = None) -> float:
    """Write ``count`` chained receipts and their checkpoints into ``home``'s store (or
    ``database_url``); returns seconds taken."""
    started = time.perf_counter()
    settings = load_settings(
        baton_env(home, **({"BATON_DATABASE_URL": database_url} if database_url else {}))
    )
    store = Store(settings.database_url)  # schema and head row, through baton's own migrations
    key = load_or_create_key(settings)
    checkpoints: list[dict[str, Any]] = []
    at = "2026-01-01T00:00:00.000000+00:00"
    prev = GENESIS_SHA256
    try:
        with store.write() as connection:
            batch: list[dict[str, Any]] = []
            for seq in range(1, count + 1):
                payload = {
                    "tool": "mcp_ping",
                    "arguments_sha256": hashlib.sha256(str(seq).encode()).hexdigest(),
                    "success": True,
                    "error_class": None,
                    "duration_seconds": 0.000123,
                }
                text = canonical(payload)
                body = (
                    f'{{"at":"{at}","kind":"tool_call","payload":{text},"prev_sha256":"{prev}","seq":{seq}}}'
                )
                digest = hashlib.sha256(body.encode()).hexdigest()
                if seq == 1:
                    assert digest == receipt_digest(1, "tool_call", at, payload, GENESIS_SHA256)
                batch.append(
                    {
                        "seq": seq,
                        "kind": "tool_call",
                        "at": at,
                        "payload": text,
                        "prev_sha256": prev,
                        "sha256": digest,
                    }
                )
                prev = digest
                if seq % CHECKPOINT_EVERY == 0 or seq == count:
                    checkpoints.append(asdict(sign(key, seq, digest)))
                if len(batch) >= BATCH or seq == count:
                    connection.execute(insert(receipts), batch)
                    batch.clear()
            connection.execute(
                update(receipt_head).where(receipt_head.c.id == 1).values(seq=count, sha256=prev)
            )
            connection.execute(insert(receipt_checkpoints), checkpoints)
        if store.is_sqlite:
            raw = store.engine.raw_connection()  # outside a transaction, which a checkpoint needs
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                raw.close()
    finally:
        store.dispose()
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


def verify_once(home: Path, database_url: str | None = None) -> tuple[float, float, str]:
    """Run ``baton receipts verify``; returns (seconds, its peak RSS in MB, first line of its output)."""
    command = [sys.executable, "-c", LAUNCHER, sys.executable, "-m", "baton", "receipts", "verify"]
    env = baton_env(home, **({"BATON_DATABASE_URL": database_url} if database_url else {}))
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    marker = done.stderr.rsplit("BENCH_RUSAGE ", 1)[-1].split()
    maxrss_kib, code = int(marker[0]), int(marker[1])
    if code != 0:
        raise RuntimeError(f"receipts verify failed: {(done.stdout + done.stderr)[-500:]}")
    return seconds, maxrss_kib / 1024, done.stdout.strip().splitlines()[0]


def measure(receipts: int, database: str = "sqlite") -> dict[str, Any]:
    """One store of ``receipts`` receipts on ``database`` (sqlite, or a throwaway postgresql), verified once."""
    with temp_home() as home, contextlib.ExitStack() as stack:
        home.mkdir(parents=True)
        url = None
        if database == "postgresql":
            from baton.testing.postgres import TemporaryPostgres

            url = stack.enter_context(TemporaryPostgres()).url
        build_seconds = build_store(home, receipts, url)
        seconds, rss_mb, line = verify_once(home, url)
        size = (home / "baton.db").stat().st_size if url is None else None
    return {
        "database": database,
        "receipts": receipts,
        "checkpoints": -(-receipts // CHECKPOINT_EVERY),
        "build_s": round(build_seconds, 1),
        "verify_s": round(seconds, 2),
        "receipts_per_s": round(receipts / seconds),
        "peak_rss_mb": round(rss_mb, 1),
        "store_bytes_per_receipt": round(size / receipts) if size else None,
        "verdict": line[:40],
    }


def run(iterations: int) -> dict[str, Any]:
    """Build N receipts (``iterations``; at least 1,000) and measure one verify of them and of 1,000;
    in a full run also PostgreSQL (N/5 receipts, when its binaries are installed)."""
    from baton.testing.postgres import find_bin_dir

    count = max(iterations, BASELINE_RECEIPTS)
    rows = [measure(receipts) for receipts in sorted({BASELINE_RECEIPTS, count})]
    largest = rows[-1]
    if iterations > 1 and find_bin_dir() is not None:
        rows.append(measure(max(count // 5, BASELINE_RECEIPTS), "postgresql"))
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
            *(
                {
                    "what": f"PostgreSQL: receipts verify of {row['receipts']:,} receipts <= {TARGET_RSS_MB:g} MB",
                    "value": f"{row['peak_rss_mb']} MB in {row['verify_s']} s",
                    "met": row["peak_rss_mb"] <= TARGET_RSS_MB,
                }
                for row in rows
                if row["database"] == "postgresql"
            ),
        ],
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000), indent=2))
