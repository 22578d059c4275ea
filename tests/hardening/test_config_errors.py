"""Bad configuration is ``config_invalid`` naming the variable, in every command, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
