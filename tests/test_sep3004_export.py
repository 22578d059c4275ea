"""``baton receipts export --format sep-3004``: the chain a real server wrote, as SEP-3004 records that
map back to baton's own receipts, verify with ``python -m baton.evidence.sep3004``, and show tampering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from tests.cli_process import run_cli
from tests.conftest import call, stdio_session


def verify(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.evidence.sep3004", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_sep3004_export_is_a_verifiable_view_of_the_receipts(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    async def drive() -> None:
        async with stdio_session(baton_env) as session:
            for _ in range(3):
                assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(drive)
    records_dir, baton_dir = tmp_path / "sep", tmp_path / "baton"
    done = run_cli(baton_env, "receipts", "export", "--format", "sep-3004", str(records_dir))
    assert done.returncode == 0, done.stderr
    assert run_cli(baton_env, "receipts", "export", str(baton_dir)).returncode == 0
    records = [json.loads(line) for line in (records_dir / "records.jsonl").read_text().splitlines()]
    receipts = [json.loads(line) for line in (baton_dir / "receipts.jsonl").read_text().splitlines()]
    assert len(records) == len(receipts) == 3
    assert records[0]["previous_hash"] is None
    for record, receipt, prior in zip(records, receipts, [None, *records], strict=False):
        extension = record["extensions"]["baton-receipt"]
        assert (extension["seq"], extension["kind"], extension["at"]) == (
            str(receipt["seq"]),
            receipt["kind"],
            receipt["at"],
        )
        assert (extension["receipt_sha256"], extension["receipt_prev_sha256"]) == (
            receipt["sha256"],
            receipt["prev_sha256"],
        )
        assert record["event_type"] == receipt["kind"] and record["baton_payload"] == receipt["payload"]
        assert record["occurred_at"].endswith("Z") and len(record["occurred_at"]) == 24
        assert prior is None or record["previous_hash"] == prior["event_hash"]
    pings = [r for r in records if r["tool_name"] == "mcp_ping"]
    assert len(pings) == 3 and {r["outcome"] for r in pings} == {"allowed"}
    assert verify(records_dir).returncode == 0
    assert {(records_dir / n).stat().st_mode & 0o777 for n in ("records.jsonl", "manifest.json")} == {0o600}
    manifest = json.loads((records_dir / "manifest.json").read_text())
    assert manifest["chain_algorithm"] == "sha-256" and manifest["canonical_form_version"] == "gif-audit/2"

    for field, value in (("receipt_sha256", "0" * 64), ("kind", "forged")):
        tampered = [dict(r) for r in records]
        tampered[1] = {
            **tampered[1],
            "extensions": {"baton-receipt": {**tampered[1]["extensions"]["baton-receipt"], field: value}},
        }
        (records_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tampered))
        done = verify(records_dir)
        assert done.returncode == 1 and "event_hash mismatch on baton-receipt-2" in done.stderr
    payload = [dict(r) for r in records]
    payload[2] = {**payload[2], "baton_payload": {**payload[2]["baton_payload"], "success": False}}
    (records_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in payload))
    done = verify(records_dir)
    assert done.returncode == 1 and "does not match its payload_sha256" in done.stderr
