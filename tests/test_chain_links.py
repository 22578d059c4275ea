"""The independent verifier checks every link, not only each row's own hash.

Each attack below rewrites an export (or the store) so that every row's ``sha256`` still matches the row
it sits in: only the links between rows (``prev_sha256`` against the previous row's hash, the first row
against genesis), the sequence (no gap, no duplicate, an integer) or the checkpoints can tell. The export
is checked as its holder would, ``python -m baton.chain_verify EXPORT --public-key KEY`` in another
process, and by :func:`baton.chain_verify.verify_export` for the failing seq and reason.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baton.chain_verify import GENESIS_SHA256, read_public_key, verify_export
from baton.evidence.receipts import receipt_digest

SEED = """
from baton.evidence.checkpoints import Checkpointer
from baton.runtime import Runtime
runtime = Runtime.open()
for n in range(3):
    runtime.receipts.append("test", {"n": n})
Checkpointer(runtime).checkpoint()
for n in range(3, 6):
    runtime.receipts.append("test", {"n": n})
Checkpointer(runtime).checkpoint()
runtime.close()
"""


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def export(baton_env: dict[str, str], tmp_path: Path) -> Path:
    """Six receipts written by a real runtime, signed checkpoints at seq 3 and 6, exported by the CLI."""
    assert run(baton_env, "-c", SEED).returncode == 0
    directory = tmp_path / "export"
    done = run(baton_env, "-m", "baton", "receipts", "export", str(directory))
    assert done.returncode == 0, done.stderr
    assert (directory / "checkpoint.pub").is_file()
    assert len((directory / "checkpoints.jsonl").read_text().splitlines()) == 2
    return directory


def rows(export: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (export / "receipts.jsonl").read_text().splitlines()]


def write(export: Path, chain: list[dict[str, Any]]) -> None:
    (export / "receipts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in chain))


def rehash(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its own sha256 recomputed over what it now says (prev_sha256 included)."""
    row["sha256"] = receipt_digest(row["seq"], row["kind"], row["at"], row["payload"], row["prev_sha256"])
    return row


def relink(chain: list[dict[str, Any]], start: str) -> list[dict[str, Any]]:
    """The whole chain rehashed and relinked from ``start`` instead of genesis."""
    prev = start
    for row in chain:
        row["prev_sha256"] = prev
        prev = rehash(row)["sha256"]
    return chain


def checked(export: Path, baton_env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], Any]:
    public = export / "checkpoint.pub"
    done = run(baton_env, "-m", "baton.chain_verify", str(export), "--public-key", str(public))
    assert "Traceback" not in done.stderr
    return done, verify_export(export, read_public_key(public))


def test_the_untouched_export_verifies(export: Path, baton_env: dict[str, str]) -> None:
    done, report = checked(export, baton_env)
    assert done.returncode == 0, done.stderr
    assert "ok: 6 receipts" in done.stdout and "anchored up to seq 6" in done.stdout
    assert report.ok and report.count == 6 and report.checkpoints == 2


def _repoint(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chain[3]["prev_sha256"] = chain[1]["sha256"]  # seq 4 now claims to follow seq 2
    rehash(chain[3])
    return chain


def _rewrite(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chain[3]["payload"] = {"n": 300}  # seq 4 says something else and its own hash says so too
    rehash(chain[3])
    return chain


def _drop(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    del chain[3]
    return chain


def _duplicate(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*chain[:4], dict(chain[3]), *chain[4:]]


def _swap(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chain[3], chain[4] = chain[4], chain[3]
    return chain


Rewrite = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
ATTACKS: dict[str, tuple[Rewrite, int, int, str]] = {
    # (the rewrite, the seq reported, the rows that verified before it, what the reason says)
    "a row repointed at an older receipt, rehashed": (_repoint, 4, 3, "prev_sha256 does not match"),
    "a row rewritten and rehashed, its successor untouched": (_rewrite, 5, 4, "prev_sha256 does not match"),
    "a row removed from the middle": (_drop, 5, 3, "sequence gap: expected 4, found 5"),
    "a row repeated": (_duplicate, 4, 4, "sequence gap: expected 5, found 4"),
    "two rows swapped": (_swap, 5, 3, "sequence gap: expected 4, found 5"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_chain_whose_rows_each_hash_right_but_do_not_link_is_broken(
    export: Path, baton_env: dict[str, str], attack: str
) -> None:
    rewrite, bad_seq, verified, reason = ATTACKS[attack]
    write(export, rewrite(rows(export)))
    done, report = checked(export, baton_env)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"receipt_chain_broken: at seq {bad_seq}: {reason}"), done.stderr
    assert not report.ok and report.error_class == "receipt_chain_broken"
    assert report.first_bad_seq == bad_seq and reason in (report.reason or "")
    assert report.count == verified


def test_a_chain_relinked_from_a_made_up_start_is_broken_at_its_first_row(
    export: Path, baton_env: dict[str, str]
) -> None:
    # every link holds except the first one's to genesis; no checkpoint is left to anchor anything
    (export / "checkpoints.jsonl").unlink()
    write(export, relink(rows(export), "1" * 64))
    done, report = checked(export, baton_env)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("receipt_chain_broken: at seq 1: prev_sha256 does not match"), done.stderr
    assert report.first_bad_seq == 1 and report.count == 0 and report.head_sha256 == GENESIS_SHA256
    write(export, relink(rows(export), GENESIS_SHA256))  # the same rows from genesis: whole again
    assert checked(export, baton_env)[0].returncode == 0


def test_a_relinked_rewrite_is_caught_by_the_checkpoints_it_no_longer_matches(
    export: Path, baton_env: dict[str, str]
) -> None:
    chain = rows(export)
    chain[1]["payload"] = {"n": 100}
    write(export, relink(chain, GENESIS_SHA256))  # self-consistent from genesis: only the anchors differ
    done, report = checked(export, baton_env)
    assert done.returncode == 1
    assert done.stderr.startswith("receipt_checkpoint_mismatch: at seq 3: the chain differs"), done.stderr
    assert report.error_class == "receipt_checkpoint_mismatch" and report.first_bad_seq == 3
    assert report.count == 2 and report.head_sha256 == chain[1]["sha256"]  # the last row that still holds


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{not json", "the payload is not valid JSON"),
        ('{"n": 1}', "the stored payload is not the canonical JSON of its value"),
        ({"n": 999}, "sha256 does not match the receipt's content"),
    ],
    ids=["not_json", "not_canonical", "edited"],
)
def test_a_tampered_payload_is_named_by_its_seq_and_reason(
    export: Path, baton_env: dict[str, str], payload: Any, reason: str
) -> None:
    """A payload stored as text that is not JSON or not canonical, or edited without its hash: the verifier
    names seq 2, says why, and reports seq 1 as the last receipt that holds."""
    (export / "checkpoints.jsonl").unlink()
    chain = rows(export)
    chain[1]["payload"] = payload
    write(export, chain)
    done, report = checked(export, baton_env)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"receipt_chain_broken: at seq 2: {reason}"), done.stderr
    assert not report.ok and report.first_bad_seq == 2 and reason in (report.reason or "")
    assert report.count == 1 and report.head_sha256 == chain[0]["sha256"]


@pytest.mark.parametrize("kept", [0, 2, 3, 5])
def test_a_tail_cut_below_a_checkpoint_is_caught(export: Path, baton_env: dict[str, str], kept: int) -> None:
    write(export, rows(export)[:kept])
    done, report = checked(export, baton_env)
    assert done.returncode == 1
    assert "receipt_checkpoint_mismatch" in done.stderr
    assert f"covers seq 6 but the chain ends at seq {kept}" in done.stderr
    assert report.count == kept and report.first_bad_seq == 6


def test_a_seq_that_is_a_json_boolean_is_not_seq_1(export: Path, baton_env: dict[str, str]) -> None:
    (export / "checkpoints.jsonl").unlink()
    (first,) = rows(export)[:1]
    first["seq"] = True  # hashed as the verifier would hash it, so only the type check can refuse it
    body = (
        f'{{"at":{json.dumps(first["at"])},"kind":"test","payload":{{"n":0}},'
        f'"prev_sha256":"{GENESIS_SHA256}","seq":True}}'
    )
    first["sha256"] = hashlib.sha256(body.encode()).hexdigest()
    write(export, [first])
    done, report = checked(export, baton_env)
    assert done.returncode == 1
    assert done.stderr.startswith("receipt_chain_broken: at seq 1: sequence gap: expected 1, found True")
    assert report.first_bad_seq == 1 and type(report.first_bad_seq) is int


def test_the_store_verifier_checks_links_and_the_head(baton_env: dict[str, str]) -> None:
    assert run(baton_env, "-c", SEED).returncode == 0
    database = Path(baton_env["BATON_HOME"]) / "baton.db"
    (Path(baton_env["BATON_HOME"]) / "checkpoints.jsonl").unlink()  # the links alone must tell
    with sqlite3.connect(database) as db:
        seq, kind, at, payload, _prev, old = db.execute(
            "SELECT seq, kind, at, payload, prev_sha256, sha256 FROM receipts WHERE seq = 4"
        ).fetchone()
        prev = db.execute("SELECT sha256 FROM receipts WHERE seq = 2").fetchone()[0]
        digest = receipt_digest(seq, kind, at, json.loads(payload), prev)
        db.execute("UPDATE receipts SET prev_sha256 = ?, sha256 = ? WHERE seq = 4", (prev, digest))
    broken = run(baton_env, "-m", "baton", "receipts", "verify")
    assert broken.returncode == 1
    assert "receipt_chain_broken: at seq 4" in broken.stderr and "prev_sha256" in broken.stderr
    with sqlite3.connect(database) as db:
        db.execute("UPDATE receipts SET prev_sha256 = ?, sha256 = ? WHERE seq = 4", (_prev, old))
    assert run(baton_env, "-m", "baton", "receipts", "verify").returncode == 0
    with sqlite3.connect(database) as db:
        db.execute("UPDATE receipt_head SET sha256 = ?", ("f" * 64,))  # a head that is no receipt's hash
    wrong = run(baton_env, "-m", "baton", "receipts", "verify")
    assert wrong.returncode == 1 and "the chain head does not match" in wrong.stderr


def test_a_checkpoint_that_does_not_verify_or_is_not_one_is_named_by_its_seq(
    export: Path, baton_env: dict[str, str]
) -> None:
    path = export / "checkpoints.jsonl"
    lines = path.read_text().splitlines()
    forged = json.loads(lines[1])
    forged["sha256"] = "e" * 64  # the seq-6 anchor moved; its signature no longer covers it
    path.write_text(lines[0] + "\n" + json.dumps(forged) + "\n")
    done, report = checked(export, baton_env)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "receipt_checkpoint_invalid: at seq 6: the checkpoint at seq 6 has a signature that does not verify"
    ), done.stderr
    assert report.error_class == "receipt_checkpoint_invalid" and report.first_bad_seq == 6
    path.write_text(lines[0] + "\n" + '["not", "a", "checkpoint"]\n')
    done, report = checked(export, baton_env)
    assert done.stderr.startswith("receipt_checkpoint_invalid: at seq None: a checkpoint is malformed")
    assert report.first_bad_seq is None and report.reason == "a checkpoint is malformed"
    path.write_text(lines[0] + "\n" + json.dumps({**forged, "key_id": "0" * 16}) + "\n")
    done, report = checked(export, baton_env)
    assert (
        "at seq 6: the checkpoint at seq 6 is signed by key 0000000000000000, which is not trusted"
        in done.stderr
    )
    assert report.first_bad_seq == 6
