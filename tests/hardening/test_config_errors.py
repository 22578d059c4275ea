"""Bad configuration is ``config_invalid`` naming the variable, in every command, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_process import run_cli

COMMANDS = [
    ["serve"],
    ["serve", "--http", "127.0.0.1:0"],
    ["doctor"],
    ["hitl", "list"],
    ["timers", "list"],
    ["receipts", "verify"],
    ["subagents", "list"],
]


def _run(env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess[str]:
    return run_cli(env, *args)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_an_unparseable_variable_is_config_invalid(baton_env: dict[str, str], args: list[str]) -> None:
    env = {**baton_env, "HITL_TIMEOUT_SECONDS": "abc", "SMTP_PORT": "port-sk-NOTPRINTED0123456789"}
    done = _run(env, args)
    assert done.returncode == 1
    assert "config_invalid" in done.stderr
    assert "HITL_TIMEOUT_SECONDS" in done.stderr and "SMTP_PORT" in done.stderr
    assert "Traceback" not in done.stderr and "pydantic" not in done.stderr
    assert "NOTPRINTED" not in done.stderr + done.stdout
    assert done.stdout == ""


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_baton_home_that_is_a_file_is_config_invalid(
    baton_env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    home = tmp_path / "not-a-directory"
    home.write_text("x")
    done = _run({**baton_env, "BATON_HOME": str(home)}, args)
    assert done.returncode == 1
    assert "config_invalid" in done.stderr and "BATON_HOME" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BATON_MAX_ARGUMENT_BYTES", "-5"),
        ("BATON_TIMER_MIN_SPAWN_INTERVAL_SECONDS", "0"),
        ("BATON_TIMER_MAX_ACTIVE", "x"),
        ("SLACK_TEAM_ID", "T0OURS,our-workspace"),
    ],
)
def test_a_cap_out_of_range_is_config_invalid(baton_env: dict[str, str], variable: str, value: str) -> None:
    done = _run({**baton_env, variable: value}, ["serve"])
    assert done.returncode == 1 and "config_invalid" in done.stderr and variable in done.stderr
    assert done.stdout == ""


def test_an_unusable_trusted_proxy_list_is_config_invalid(baton_env: dict[str, str]) -> None:
    done = _run(
        {**baton_env, "BATON_TRUSTED_PROXIES": "10.0.0.1,not-an-address"}, ["serve", "--http", "127.0.0.1:0"]
    )
    assert done.returncode == 1 and "config_invalid" in done.stderr and "BATON_TRUSTED_PROXIES" in done.stderr


@pytest.mark.parametrize("args", [a for a in COMMANDS if a != ["serve"]], ids=" ".join)
def test_a_database_url_that_is_no_url_is_config_invalid_without_its_value(
    baton_env: dict[str, str], args: list[str]
) -> None:
    done = _run({**baton_env, "BATON_DATABASE_URL": "garbage-with-pw-hunter2"}, args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("config_invalid: BATON_DATABASE_URL cannot be opened"), done.stderr
    assert "hunter2" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_a_port_out_of_range_or_in_use_is_one_typed_line(baton_env: dict[str, str]) -> None:
    import socket

    out_of_range = _run(baton_env, ["serve", "--http", "127.0.0.1:99999"])
    assert out_of_range.returncode == 1 and out_of_range.stderr.startswith(
        "config_invalid: --http takes HOST:PORT"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args in (["serve", "--http", f"127.0.0.1:{port}"], ["console", "--bind", f"127.0.0.1:{port}"]):
            done = _run(baton_env, args)
            assert done.returncode == 1, done.stderr
            assert done.stderr.strip().endswith(
                f"http_bind_failed: Cannot listen on 127.0.0.1:{port}: the port is already in use."
            ), done.stderr
            assert "Traceback" not in done.stderr and "uvicorn" not in done.stderr.lower()


def test_receipts_export_onto_a_file_is_refused_and_leaves_it_alone(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    code = (
        "from baton.runtime import Runtime\n"
        "from baton.evidence.checkpoints import Checkpointer\n"
        "rt = Runtime.open(); rt.receipts.append('test', {'n': 1}); Checkpointer(rt).checkpoint_quietly()\n"
    )
    subprocess.run([sys.executable, "-c", code], env=baton_env, check=True, timeout=300)
    target = tmp_path / "existing.txt"
    target.write_text("keep me")
    done = _run(baton_env, ["receipts", "export", str(target)])
    assert (
        done.returncode == 1
        and done.stderr.startswith("invalid_arguments: ")
        and "is not a directory" in done.stderr
    )
    assert target.read_text() == "keep me"
