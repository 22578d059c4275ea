"""Checkpoints a witness co-signs (C2SP tlog-witness): a real ``baton witness serve`` cosigns the checkpoints
a real ``baton serve`` sends it, refuses a rolled-back chain, and a verifier pinning its key catches an
export that was rolled back (withheld) even though the export verifies on its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from baton.chain_verify import ed25519_verify
from baton.witness.core import origin_hash
from baton.witness_verify import cosigned_time, parse_body, parse_vkey, split_note
from tests.cli_process import run_cli
from tests.conftest import call, stdio_session
from tests.servers import START_GUARD_SECONDS

WITNESS = "witness.test/w1"


@contextmanager
def witness_server(env: dict[str, str], log_key: str, home: Path, tmp_path: Path) -> Iterator[str]:
    """``baton witness serve`` on a free port, yielded (its base URL) once its line says it is listening."""
    command = [
        sys.executable,
        "-m",
        "baton",
        "witness",
        "serve",
        "--log-key",
        log_key,
        "--name",
        WITNESS,
        "--bind",
        "127.0.0.1:0",
        "--home",
        str(home),
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    log = tmp_path / "witness.log"
    drain: threading.Thread | None = None
    try:
        lines = []
        while "listening on" not in (line := process.stderr.readline()):
            assert line, "".join(lines)  # the witness exited before it listened
            lines.append(line)
        log.write_text("".join([*lines, line]))

        def copy_rest() -> None:
            assert process.stderr is not None
            with log.open("a") as handle:
                handle.write(process.stderr.read())

        drain = threading.Thread(target=copy_rest, daemon=True)
        drain.start()
        yield line.split("listening on ", 1)[1].split(";", 1)[0]
    finally:
        process.terminate()
        process.wait(timeout=START_GUARD_SECONDS)
        if drain is not None:
            drain.join(timeout=START_GUARD_SECONDS)
        process.stderr.close()


def serve_pings(env: dict[str, str], count: int) -> None:
    """A real ``baton serve`` answers ``count`` pings; its shutdown checkpoint goes to the witness."""

    async def drive() -> None:
        async with stdio_session(env) as session:
            for _ in range(count):
                assert (await call(session, "mcp_ping"))["success"] is True

    anyio.run(drive)


def witnessed_sizes(home: Path) -> list[int]:
    import json

    path = home / "witnessed.jsonl"
    return [json.loads(line)["size"] for line in path.read_text().splitlines()] if path.is_file() else []


def export(env: dict[str, str], directory: Path) -> None:
    done = run_cli(env, "receipts", "export", str(directory))
    assert done.returncode == 0, done.stderr


def chain_verify(directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "baton.chain_verify",
            str(directory),
            "--public-key",
            str(directory / "checkpoint.pub"),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def witnessed(baton_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[dict[str, str], str, Path]]:
    """A baton home configured with a running witness: (env, witness URL, witness home)."""
    done = run_cli(baton_env, "witness", "log-key")
    assert done.returncode == 0, done.stderr
    witness_home = tmp_path / "witness-home"
    with witness_server(baton_env, done.stdout.strip(), witness_home, tmp_path) as url:
        vkey = (witness_home / "witness.vkey").read_text().strip()
        yield {**baton_env, "BATON_WITNESS_URLS": url, "BATON_WITNESS_KEYS": vkey}, url, witness_home


def test_a_witness_cosigns_each_checkpoint_that_extends_the_last(
    witnessed: tuple[dict[str, str], str, Path], tmp_path: Path
) -> None:
    env, url, witness_home = witnessed
    home = Path(env["BATON_HOME"])
    serve_pings(env, 2)
    # the next checkpoint carries a consistency proof from the first; at most 2 receipt hashes per request,
    # the backlog of 3 goes as two cosigned checkpoints (4, then 5)
    serve_pings({**env, "BATON_WITNESS_MAX_PROOF_LINES": "2"}, 3)
    assert witnessed_sizes(home) == [2, 4, 5]
    second = 5
    witness = parse_vkey((witness_home / "witness.vkey").read_text())
    origin = run_cli(env, "witness", "log-key").stdout.strip().split("+")[0]
    latest = httpx.get(f"{url}/{origin_hash(origin)}/checkpoint").text
    assert cosigned_time(latest, witness, ed25519_verify) is not None
    assert parse_body(split_note(latest)[0])[:2] == (origin, second)
    # the witness's key stays in its home, 0600, and was never printed
    key_text = (witness_home / "witness.key").read_text()
    assert (witness_home / "witness.key").stat().st_mode & 0o777 == 0o600
    assert key_text.splitlines()[1] not in (tmp_path / "witness.log").read_text()
    directory = tmp_path / "export"
    export(env, directory)
    (tmp_path / "latest.txt").write_text(latest)
    done = chain_verify(
        directory,
        "--witness-key",
        str(witness_home / "witness.vkey"),
        "--witness-checkpoint",
        str(tmp_path / "latest.txt"),
    )
    assert done.returncode == 0, done.stderr
    # an auditor without baton: the two stdlib-only files copied alone, no site-packages at all
    standalone = tmp_path / "standalone"
    standalone.mkdir()
    for name in ("chain_verify.py", "delegation.py", "witness_verify.py"):
        shutil.copy(Path(__import__("baton").__file__).parent / name, standalone / name)
    alone = subprocess.run(
        [
            sys.executable,
            "-S",
            "-E",
            "-s",
            str(standalone / "chain_verify.py"),
            str(directory),
            "--public-key",
            str(directory / "checkpoint.pub"),
            "--witness-key",
            str(witness_home / "witness.vkey"),
            "--witness-checkpoint",
            str(tmp_path / "latest.txt"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert alone.returncode == 0, alone.stderr
    # the cosigned checkpoints withheld from the export, and no witness view given: nothing vouches for it
    (directory / "witnessed.jsonl").unlink()
    withheld = chain_verify(directory, "--witness-key", str(witness_home / "witness.vkey"))
    assert withheld.returncode == 1 and "receipt_witness_rollback" in withheld.stderr


def test_a_rolled_back_chain_is_refused_by_the_witness_and_caught_by_a_verifier_pinning_it(
    witnessed: tuple[dict[str, str], str, Path], tmp_path: Path
) -> None:
    env, url, witness_home = witnessed
    home = Path(env["BATON_HOME"])
    serve_pings(env, 2)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(home, snapshot)  # the whole home: database, checkpoint file, witnessed.jsonl
    serve_pings(env, 3)
    cosigned = witnessed_sizes(home)[-1]
    # the operator restores the old home and carries on: its own checkpoints agree, the witness does not
    rolled = {**env, "BATON_HOME": str(snapshot)}
    serve_pings(rolled, 1)
    assert witnessed_sizes(snapshot) == witnessed_sizes(home)[:1]  # no cosignature for the rolled-back chain
    origin = run_cli(env, "witness", "log-key").stdout.strip().split("+")[0]
    latest = httpx.get(f"{url}/{origin_hash(origin)}/checkpoint").text
    assert parse_body(split_note(latest)[0])[1] == cosigned  # the witness kept the newest head it saw
    directory = tmp_path / "rolled-export"
    export(rolled, directory)
    assert chain_verify(directory).returncode == 0  # the rolled-back export is consistent on its own
    (tmp_path / "latest.txt").write_text(latest)
    done = chain_verify(
        directory,
        "--witness-key",
        str(witness_home / "witness.vkey"),
        "--witness-checkpoint",
        str(tmp_path / "latest.txt"),
    )
    assert done.returncode == 1
    assert "receipt_witness_rollback" in done.stderr and "rolled back or withheld" in done.stderr
    # served on past the witnessed size: a fork at the same length, refused again and caught as one
    serve_pings(rolled, cosigned - witnessed_sizes(home)[0] - 1)
    assert witnessed_sizes(snapshot) == witnessed_sizes(home)[:1]
    forked = tmp_path / "forked-export"
    export(rolled, forked)
    done = chain_verify(
        forked,
        "--witness-key",
        str(witness_home / "witness.vkey"),
        "--witness-checkpoint",
        str(tmp_path / "latest.txt"),
    )
    assert done.returncode == 1
    assert f"differs from the checkpoint the witness cosigned at seq {cosigned}" in done.stderr


def test_the_witness_refuses_a_rollback_a_fork_an_unknown_log_and_a_forged_signature(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    import hashlib

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from baton.evidence.witnessing import sign_note
    from baton.witness_verify import NOTE_ED25519, VerifierKey, roots

    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    log = VerifierKey("log.test/chain", NOTE_ED25519, raw)
    chain = [hashlib.sha256(bytes([n])).hexdigest() for n in range(6)]
    forked = [*chain[:4], hashlib.sha256(b"other").hexdigest(), chain[5]]
    root = list(roots(chain))
    fork_root = list(roots(forked))

    def request(old: int, proof: list[str], note: str) -> httpx.Response:
        import base64

        lines = [f"old {old}", *(base64.b64encode(bytes.fromhex(h)).decode() for h in proof)]
        return httpx.post(
            f"{url}/add-checkpoint", content="".join(f"{line}\n" for line in lines) + "\n" + note
        )

    with witness_server(baton_env, log.encode(), tmp_path / "witness-home", tmp_path) as url:
        witness = parse_vkey((tmp_path / "witness-home" / "witness.vkey").read_text())
        first = request(0, [], sign_note(key, log, 3, root[2]))
        assert first.status_code == 200
        assert cosigned_time(sign_note(key, log, 3, root[2]) + first.text, witness, ed25519_verify)
        stale = request(0, [], sign_note(key, log, 5, root[4]))
        assert (stale.status_code, stale.text, stale.headers["content-type"]) == (
            409,
            "3\n",
            "text/x.tlog.size",
        )
        assert request(3, chain[3:5], sign_note(key, log, 5, root[4])).status_code == 200
        assert request(5, [], sign_note(key, log, 4, root[3])).status_code == 400  # rolled back
        assert (
            request(5, [], sign_note(key, log, 5, fork_root[4])).status_code == 422
        )  # same size, other head
        assert (
            request(5, forked[5:], sign_note(key, log, 6, fork_root[5])).status_code == 422
        )  # forked history
        assert (
            request(5, chain[5:], sign_note(key, log, 6, fork_root[5])).status_code == 422
        )  # proof disagrees
        other = Ed25519PrivateKey.generate()
        assert request(5, chain[5:], sign_note(other, log, 6, root[5])).status_code == 403
        stranger = VerifierKey("log.test/other", NOTE_ED25519, raw)
        assert request(0, [], sign_note(key, stranger, 1, root[0])).status_code == 404
        assert (
            request(5, chain[5:], sign_note(key, log, 6, root[5])).status_code == 200
        )  # the true chain goes on
