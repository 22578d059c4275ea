"""Signed checkpoints anchor the receipt chain outside the database: three attacks made with raw SQL on the
store of a real ``baton serve`` are caught, and an export verifies with nothing but the public key."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from baton.chain_verify import (
    GENESIS_SHA256,
    checkpoint_message,
    ed25519_verify_pure,
    public_key_id,
    verify_rows,
)
from baton.evidence.receipts import canonical_json, receipt_digest
from baton.testing.clock import ManualClock
from tests.cli_process import run_cli
from tests.conftest import call, stdio_session


def test_the_pure_python_verifier_agrees_with_cryptography() -> None:
    key = Ed25519PrivateKey.generate()
    from cryptography.hazmat.primitives import serialization

    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    for n in range(4):
        message = checkpoint_message(n, "ab" * 32, "2026-01-01T00:00:00+00:00", public_key_id(public))
        signature = key.sign(message)
        assert ed25519_verify_pure(public, message, signature)
        assert not ed25519_verify_pure(public, message + b"x", signature)
        forged = bytes([signature[0] ^ 1]) + signature[1:]
        assert not ed25519_verify_pure(public, message, forged)
        assert not ed25519_verify_pure(public, message, signature[:32] + signature[32:63] + b"\xff")


def test_a_payload_with_duplicate_keys_or_bad_json_is_a_broken_chain() -> None:
    digest = receipt_digest(1, "k", "t", {"a": 2}, GENESIS_SHA256)
    # the hash covers {"a": 2}; the stored bytes say something else as well
    duplicated = verify_rows([(1, "k", "t", '{"a":1,"a":2}', GENESIS_SHA256, digest)])
    assert not duplicated.ok
    assert duplicated.error_class == "receipt_chain_broken"
    assert "canonical" in (duplicated.reason or "")
    assert verify_rows([(1, "k", "t", '{"a":2}', GENESIS_SHA256, digest)]).ok
    garbled = verify_rows([(1, "k", "t", '{"a":', GENESIS_SHA256, digest)])
    assert not garbled.ok
    assert garbled.error_class == "receipt_chain_broken"
    assert "not valid JSON" in (garbled.reason or "")


@pytest.fixture
def served_home(baton_env: dict[str, str], tmp_path: Path) -> Path:
    """A home whose chain a real server wrote (pings, a rejected approval), closed with its shutdown
    checkpoint."""

    async def drive() -> None:
        async with stdio_session(baton_env) as session:
            for _ in range(3):
                assert (await call(session, "mcp_ping"))["success"] is True
            async with anyio.create_task_group() as group:
                outcome: dict[str, object] = {}

                async def ask() -> None:
                    outcome.update(
                        await call(session, "mcp_request_admin_approval", {"request_message": "drop it"})
                    )

                group.start_soon(ask)
                with anyio.fail_after(300):
                    while not (pending := json.loads(run_cli(baton_env, "hitl", "list", "--json").stdout)):
                        await anyio.sleep(0.1)
                done = run_cli(baton_env, "hitl", "reject", pending[0]["request_id"])
                assert done.returncode == 0, done.stderr
            assert outcome["decision"] == "rejected"
            for _ in range(3):
                assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(drive)
    home = Path(baton_env["BATON_HOME"])
    assert (home / "checkpoints.jsonl").is_file()
    return home


def attacked_copy(home: Path, tmp_path: Path, name: str, env: dict[str, str]) -> dict[str, str]:
    copy = tmp_path / name
    shutil.copytree(home, copy)
    return {**env, "BATON_HOME": str(copy)}


def rows(db: sqlite3.Connection) -> list[tuple[int, str, str, str, str, str]]:
    return db.execute(
        "SELECT seq, kind, at, payload, prev_sha256, sha256 FROM receipts ORDER BY seq"
    ).fetchall()


def test_receipts_verify_checks_the_shutdown_checkpoint(served_home: Path, baton_env: dict[str, str]) -> None:
    done = run_cli(baton_env, "receipts", "verify")
    assert done.returncode == 0, done.stderr
    assert "signed checkpoints verified" in done.stdout


def test_deleting_the_newest_receipts_and_rewinding_the_head_is_caught(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = attacked_copy(served_home, tmp_path, "rewound", baton_env)
    with sqlite3.connect(Path(env["BATON_HOME"]) / "baton.db") as db:
        chain = rows(db)
        keep = chain[len(chain) // 2]
        db.execute("DELETE FROM receipts WHERE seq > ?", (keep[0],))
        db.execute("UPDATE receipt_head SET seq = ?, sha256 = ?", (keep[0], keep[5]))
        db.execute("DELETE FROM receipt_checkpoints")
    done = run_cli(env, "receipts", "verify")
    assert done.returncode == 1
    assert "receipt_checkpoint_mismatch" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_never_signs_a_rewound_chain_whose_last_signed_head_only_the_file_keeps(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    # the attacker rewinds the chain and deletes the store's checkpoints; the checkpoint file still holds
    # the head the key signed last, so the signer must refuse to vouch for the rewound chain
    env = attacked_copy(served_home, tmp_path, "rewound-signer", baton_env)
    home = Path(env["BATON_HOME"])
    with sqlite3.connect(home / "baton.db") as db:
        chain = rows(db)
        keep = chain[len(chain) // 2]
        db.execute("DELETE FROM receipts WHERE seq > ?", (keep[0],))
        db.execute("UPDATE receipt_head SET seq = ?, sha256 = ?", (keep[0], keep[5]))
        db.execute("DELETE FROM receipt_checkpoints")
    signed = file_lines(home)

    async def ping_once() -> None:
        async with stdio_session(env) as session:
            assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(ping_once)  # the head moves past the rewound one; the shutdown checkpoint is refused
    assert file_lines(home) == signed
    with sqlite3.connect(home / "baton.db") as db:
        assert db.execute("SELECT COUNT(*) FROM receipt_checkpoints").fetchone() == (0,)


def test_a_server_never_signs_past_a_signed_head_whose_history_was_rewritten(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    # the rejection becomes an approval and every hash is recomputed; new receipts then move the head
    # past the signed one, so only the check that the chain still holds the signed hash refuses to sign
    env = attacked_copy(served_home, tmp_path, "rewritten-signer", baton_env)
    home = Path(env["BATON_HOME"])
    with sqlite3.connect(home / "baton.db") as db:
        assert flip_decisions_and_rehash(db)
    signed = file_lines(home)

    async def ping_once() -> None:
        async with stdio_session(env) as session:
            assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(ping_once)
    assert file_lines(home) == signed
    with sqlite3.connect(home / "baton.db") as db:
        stored = db.execute("SELECT seq, sha256 FROM receipt_checkpoints ORDER BY seq").fetchall()
    assert stored == [(line["seq"], line["sha256"]) for line in signed]


def test_deleting_everything_and_resetting_to_genesis_is_caught(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = attacked_copy(served_home, tmp_path, "genesis", baton_env)
    with sqlite3.connect(Path(env["BATON_HOME"]) / "baton.db") as db:
        db.execute("DELETE FROM receipts")
        db.execute("UPDATE receipt_head SET seq = 0, sha256 = ?", (GENESIS_SHA256,))
        db.execute("DELETE FROM receipt_checkpoints")
    done = run_cli(env, "receipts", "verify")
    assert done.returncode == 1
    assert "receipt_checkpoint_mismatch" in done.stderr


def flip_decisions_and_rehash(db: sqlite3.Connection) -> bool:
    """Change every decision to an approval and recompute every hash and the head, as an attacker holding
    the database (not the key) can."""
    prev = GENESIS_SHA256
    flipped = False
    for seq, kind, at, payload, _prev, _sha in rows(db):
        value = json.loads(payload)
        if kind == "hitl_decided":
            # an approval by the decider's own path, which carries no passkey assertion to contradict it
            proofs = [{"person": who, "via": value["via"], "assertion": None} for who in value["approvers"]]
            value.update(decision="approved", approved=True, proofs=proofs)
            flipped = True
        digest = receipt_digest(seq, kind, at, value, prev)
        db.execute(
            "UPDATE receipts SET payload = ?, prev_sha256 = ?, sha256 = ? WHERE seq = ?",
            (canonical_json(value), prev, digest, seq),
        )
        prev = digest
    db.execute("UPDATE receipt_head SET sha256 = ?", (prev,))
    return flipped


def test_flipping_a_rejection_to_an_approval_and_rehashing_is_caught(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = attacked_copy(served_home, tmp_path, "flipped", baton_env)
    with sqlite3.connect(Path(env["BATON_HOME"]) / "baton.db") as db:
        assert flip_decisions_and_rehash(db)
        db.execute("DELETE FROM receipt_checkpoints")
    # without the anchors the rewritten chain is self-consistent: exactly what checkpoints are for
    unanchored = {**env, "BATON_CHECKPOINT_PATH": str(tmp_path / "absent.jsonl")}
    assert run_cli(unanchored, "receipts", "verify").returncode == 0
    done = run_cli(env, "receipts", "verify")
    assert done.returncode == 1
    assert "receipt_checkpoint_mismatch" in done.stderr


def test_a_forged_checkpoint_line_is_refused(served_home: Path, baton_env: dict[str, str]) -> None:
    path = served_home / "checkpoints.jsonl"
    line = json.loads(path.read_text().splitlines()[-1])
    line["seq"] += 1000  # claims a longer chain, with the old signature
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    done = run_cli(baton_env, "receipts", "verify")
    assert done.returncode == 1
    assert "receipt_checkpoint_invalid" in done.stderr


def test_an_export_verifies_with_only_the_public_key(
    served_home: Path, baton_env: dict[str, str], tmp_path: Path
) -> None:
    export = tmp_path / "export"
    done = run_cli(baton_env, "receipts", "export", str(export))
    assert done.returncode == 0, done.stderr
    public = tmp_path / "trusted.pub"
    shutil.copy(served_home / "keys" / "checkpoint.pub", public)
    shutil.rmtree(served_home)  # the verifier has the export and the public key, nothing else
    pure = "import sys; sys.modules['cryptography'] = None; from baton.chain_verify import main; sys.exit(main())"
    for command in (["-m", "baton.chain_verify"], ["-c", pure]):
        checked = subprocess.run(
            [sys.executable, *command, str(export), "--public-key", str(public)],
            env=baton_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.returncode == 0, checked.stderr
        assert "signed checkpoints verified" in checked.stdout
    lines = (export / "receipts.jsonl").read_text().splitlines()
    (export / "receipts.jsonl").write_text("\n".join(lines[:-2]) + "\n")  # truncated
    truncated = subprocess.run(
        [sys.executable, "-m", "baton.chain_verify", str(export), "--public-key", str(public)],
        env=baton_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert truncated.returncode == 1
    assert "receipt_checkpoint_mismatch" in truncated.stderr
    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw().hex()
    public.write_text(other + "\n")
    (export / "receipts.jsonl").write_text("\n".join(lines) + "\n")
    untrusted = subprocess.run(
        [sys.executable, "-m", "baton.chain_verify", str(export), "--public-key", str(public)],
        env=baton_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert untrusted.returncode == 1
    assert "receipt_checkpoint_invalid" in untrusted.stderr


def test_a_serving_process_checkpoints_every_n_receipts(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_CHECKPOINT_EVERY_RECEIPTS": "3"}
    path = Path(env["BATON_HOME"]) / "checkpoints.jsonl"

    async def drive() -> None:
        async with stdio_session(env) as session:
            for _ in range(4):
                await call(session, "mcp_ping")
            with anyio.fail_after(300):
                while not path.is_file():
                    await anyio.sleep(0.1)
            # written while serving, before any shutdown
            assert json.loads(path.read_text().splitlines()[0])["seq"] >= 3

    anyio.run(drive)
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_verify_streams_and_checks_checkpoints_on_each_database(database_url: str, tmp_path: Path) -> None:
    from sqlalchemy import delete, update

    from baton.config import Settings
    from baton.evidence.anchor import verify_store
    from baton.evidence.checkpoints import Checkpointer
    from baton.runtime import Runtime
    from baton.store.schema import receipt_checkpoints, receipt_head, receipts

    runtime = Runtime.open(Settings(baton_home=tmp_path / "home", baton_database_url=database_url))
    try:
        for n in range(50):
            runtime.receipts.append("test", {"n": n, "text": "é" * n})
        checkpoint = Checkpointer(runtime).checkpoint()
        assert checkpoint is not None
        assert checkpoint.seq == 50
        for n in range(10):
            runtime.receipts.append("test", {"n": n})
        report = verify_store(runtime)
        assert report.ok, report
        assert (report.count, report.checkpoints, report.anchored_seq) == (60, 1, 50)
        kept = runtime.receipts.get(40)
        assert kept is not None
        with runtime.store.write() as connection:
            connection.execute(delete(receipts).where(receipts.c.seq > 40))
            connection.execute(update(receipt_head).values(seq=40, sha256=kept.sha256))
            connection.execute(delete(receipt_checkpoints))
        report = verify_store(runtime)
        assert not report.ok
        assert report.error_class == "receipt_checkpoint_mismatch"
    finally:
        runtime.close()


def test_an_http_server_checkpoints_the_head_at_shutdown(baton_env: dict[str, str], tmp_path: Path) -> None:
    from tests.servers import free_port, http_server

    seed = "from baton.runtime import Runtime\nrt = Runtime.open()\nfor n in range(7): rt.receipts.append('test', {'n': n})\n"
    subprocess.run([sys.executable, "-c", seed], env=baton_env, check=True, timeout=300)
    path = Path(baton_env["BATON_HOME"]) / "checkpoints.jsonl"
    with http_server(baton_env, f"127.0.0.1:{free_port()}", tmp_path):
        pass  # SIGTERM on leaving: uvicorn ends the lifespan, which signs the head
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["seq"] == 7
    done = run_cli(baton_env, "receipts", "verify")
    assert done.returncode == 0, done.stderr
    assert "anchored up to seq 7" in done.stdout


def test_a_payload_that_is_not_json_is_a_typed_failure_not_a_traceback(baton_env: dict[str, str]) -> None:
    seed = "from baton.runtime import Runtime\nrt = Runtime.open()\nfor n in range(3): rt.receipts.append('test', {'n': n})\n"
    subprocess.run([sys.executable, "-c", seed], env=baton_env, check=True, timeout=300)
    with sqlite3.connect(Path(baton_env["BATON_HOME"]) / "baton.db") as db:
        db.execute("UPDATE receipts SET payload = '{\"n\": ' WHERE seq = 2")
    verified = run_cli(baton_env, "receipts", "verify")
    assert verified.returncode == 1
    assert "receipt_chain_broken: at seq 2" in verified.stderr
    assert "not valid JSON" in verified.stderr
    listed = run_cli(baton_env, "receipts", "list", "--oldest", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[1]["payload"] == {"unreadable_payload": True}
    for done in (verified, listed):
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("receipts_text", "checkpoints_text", "error_class"),
    [
        (None, None, "receipt_chain_broken"),  # no export at all
        ('{"seq": 1,\n', "", "receipt_chain_broken"),
        ("[1, 2]\n", "", "receipt_chain_broken"),
        ('{"seq": 1, "seq": 1}\n', "", "receipt_chain_broken"),
        ("", '"not a checkpoint"\n', "receipt_checkpoint_invalid"),
        ("", '{"seq": 1}\n', "receipt_checkpoint_invalid"),
        ("", "{bad\n", "receipt_checkpoint_invalid"),
    ],
)
def test_the_independent_verifier_answers_hostile_exports_with_a_class(
    tmp_path: Path, receipts_text: str | None, checkpoints_text: str | None, error_class: str
) -> None:
    from baton.chain_verify import main

    export = tmp_path / "export"
    export.mkdir()
    if receipts_text is not None:
        (export / "receipts.jsonl").write_text(receipts_text)
    if checkpoints_text is not None:
        (export / "checkpoints.jsonl").write_text(checkpoints_text)
    public = tmp_path / "k.pub"
    from cryptography.hazmat.primitives import serialization

    raw = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    public.write_text(raw.hex())
    done = subprocess.run(
        [sys.executable, "-m", "baton.chain_verify", str(export), "--public-key", str(public)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
    )
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(error_class), done.stderr
    assert "Traceback" not in done.stderr
    assert main([str(export)]) == 2  # no key given: usage, not a silent pass


def test_a_checkpoint_is_due_after_n_receipts_or_after_the_interval_once_the_head_moved(
    tmp_path: Path, manual_clock: ManualClock
) -> None:
    from baton.config import Settings
    from baton.evidence.checkpoints import Checkpointer
    from baton.runtime import Runtime

    def checkpointer(**settings: object) -> Checkpointer:
        return Checkpointer(
            Runtime.open(Settings.model_validate({"baton_home": tmp_path / "home", **settings}))
        )

    by_count = checkpointer(baton_checkpoint_every_receipts=3, baton_checkpoint_interval_seconds=3600)
    assert not by_count.due()  # an empty chain is never checkpointed
    for n in range(2):
        by_count.runtime.receipts.append("test", {"n": n})
    assert not by_count.due()
    by_count.runtime.receipts.append("test", {"n": 2})
    assert by_count.due()
    assert by_count.checkpoint() is not None
    assert not by_count.due()
    assert by_count.checkpoint() is None  # the same head is not signed twice
    by_time = checkpointer(baton_checkpoint_every_receipts=1000, baton_checkpoint_interval_seconds=60)
    manual_clock.advance(60)
    assert not by_time.due()  # the head has not moved since the last checkpoint
    by_time.runtime.receipts.append("test", {"n": 3})
    assert by_time.due()
    assert by_time.checkpoint() is not None
    by_time.runtime.receipts.append("test", {"n": 4})
    manual_clock.advance(59)
    assert not by_time.due()  # the head moved, but the interval has not passed on the clock
    manual_clock.advance(1)
    assert by_time.due()


async def reject_one_request(env: dict[str, str]) -> None:
    """Serve over stdio: a ping, then an approval request that a person rejects through the CLI."""
    async with stdio_session(env) as session:
        assert (await call(session, "mcp_ping"))["success"] is True
        outcome: dict[str, object] = {}
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                outcome.update(await call(session, "mcp_request_admin_approval", {"request_message": "wipe"}))

            group.start_soon(ask)
            with anyio.fail_after(300):
                while not (pending := json.loads(run_cli(env, "hitl", "list", "--json").stdout)):
                    await anyio.sleep(0.1)
            done = run_cli(env, "hitl", "reject", pending[0]["request_id"])
            assert done.returncode == 0, done.stderr
        assert outcome["decision"] == "rejected"
        # the server signs while it serves (every receipt here), not only at shutdown
        home = Path(env["BATON_HOME"])
        with sqlite3.connect(home / "baton.db") as db:
            (decided,) = db.execute("SELECT max(seq) FROM receipts WHERE kind = 'hitl_decided'").fetchone()
        with anyio.fail_after(300):
            while max((line["seq"] for line in file_lines(home)), default=0) < decided:
                await anyio.sleep(0.1)


def file_lines(home: Path) -> list[dict[str, object]]:
    path = home / "checkpoints.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_checkpoint_row_forged_in_the_database_neither_suspends_signing_nor_hides_a_flipped_decision(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = {
        **baton_env,
        "BATON_CHECKPOINT_EVERY_RECEIPTS": "1",
        "BATON_CHECKPOINT_INTERVAL_SECONDS": "3600",
    }
    home = Path(env["BATON_HOME"])

    async def ping_once() -> None:
        async with stdio_session(env) as session:
            assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(ping_once)  # a first run: a key and a signed checkpoint exist
    key_id = file_lines(home)[-1]["key_id"]
    # 1. the attacker (database, no key) plants a checkpoint far ahead of the chain
    with sqlite3.connect(home / "baton.db") as db:
        db.execute(
            "INSERT INTO receipt_checkpoints (seq, sha256, at, key_id, signature) VALUES (?, ?, ?, ?, ?)",
            (10**12, "f" * 64, "2026-01-01T00:00:00+00:00", key_id, "00" * 64),
        )
    # a second run: a person rejects a request, and the server still signs the head while serving
    anyio.run(reject_one_request, env)
    planted = run_cli(attacked_copy(home, tmp_path, "planted", env), "receipts", "verify")
    assert planted.returncode == 1
    assert "receipt_checkpoint_invalid: at seq 1000000000000" in planted.stderr
    # 2. the rejection becomes an approval, every hash recomputed; 3. the planted row goes
    with sqlite3.connect(home / "baton.db") as db:
        assert flip_decisions_and_rehash(db)
        db.execute("DELETE FROM receipt_checkpoints WHERE seq = ?", (10**12,))
        (forged_head,) = db.execute("SELECT sha256 FROM receipt_head").fetchone()
    anyio.run(ping_once)  # a third run, and its shutdown checkpoint
    assert forged_head not in {line["sha256"] for line in file_lines(home)}  # never signed
    done = run_cli(env, "receipts", "verify")
    assert done.returncode == 1, done.stdout
    assert "receipt_checkpoint_mismatch" in done.stderr
    assert "Traceback" not in done.stderr
    export = tmp_path / "export"
    exported = run_cli(env, "receipts", "export", str(export))
    assert exported.returncode == 0, exported.stderr
    public = tmp_path / "trusted.pub"
    shutil.copy(home / "keys" / "checkpoint.pub", public)
    independent = subprocess.run(
        [sys.executable, "-m", "baton.chain_verify", str(export), "--public-key", str(public)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert independent.returncode == 1, independent.stdout
    assert independent.stderr.startswith("receipt_checkpoint_mismatch"), independent.stderr
