"""Output on a pipe: plain, stable, never wrapped or cut; help shows flags as flags."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest
from rich.console import Console

from tests.cli_process import run_cli
from tests.test_cli import seed_receipts


def test_receipts_verify_on_a_pipe_is_one_line_per_fact(baton_env: dict[str, str]) -> None:
    seed_receipts(baton_env, 2)
    done = run_cli({**baton_env, "COLUMNS": "40"}, "receipts", "verify")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ok: 2 receipts"
    assert lines[1].startswith("head: ") and len(lines[1]) == len("head: ") + 64
    assert lines[2].startswith("not anchored: ")  # seeded directly, so no signed checkpoint yet
    assert len(lines) == 3


def test_a_piped_listing_is_plain_and_never_cut(baton_env: dict[str, str]) -> None:
    seed_receipts(baton_env, 3)
    done = run_cli({**baton_env, "COLUMNS": "40"}, "receipts", "list", "--limit", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["seq", "kind", "at", "sha256", "payload"]
    assert len(lines) == 4
    assert not any(ch in done.stdout for ch in "…│┃━─\x1b")
    assert all(line == line.rstrip() for line in lines)
    assert [line.split()[0] for line in lines[1:]] == ["3", "2", "1"]  # the newest first
    listed = json.loads(run_cli(baton_env, "receipts", "list", "--json", "--oldest", "--limit", "2").stdout)
    assert [row["seq"] for row in listed] == [1, 2]
    unknown = run_cli(baton_env, "receipts", "list", "--kind", "tset")
    assert unknown.returncode == 0 and "tset" not in unknown.stdout  # nothing of that kind (yet)
    assert unknown.stderr.startswith("no receipt has the kind 'tset' yet; the chain holds: test")


def on_a_terminal(env: dict[str, str], *args: str, columns: int = 80) -> str:
    """What ``baton ARGS`` shows on a terminal ``columns`` wide (stdout is a pty)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**env, "COLUMNS": str(columns), "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", *args],
        env=env,
        stdout=terminal,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    process.wait(timeout=300)
    os.close(controller)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode())  # the text, without colour codes


def test_ids_on_an_80_column_terminal_are_whole_and_other_columns_wrap(baton_env: dict[str, str]) -> None:
    code = (
        "import asyncio\n"
        "from baton.runtime import Runtime\n"
        "from baton.hitl.broker import NewRequest, get_broker\n"
        "broker = get_broker(Runtime.open())\n"
        "view = asyncio.run(broker.create(NewRequest('approval', 'word ' * 40, timeout_seconds=3600)))\n"
        "print(view['request_id'])\n"
    )
    made = subprocess.run(
        [sys.executable, "-c", code], env=baton_env, check=True, timeout=300, capture_output=True, text=True
    )
    request_id = made.stdout.strip()
    screen = on_a_terminal(baton_env, "hitl", "list")
    assert request_id in screen, screen
    assert "…" not in screen  # nothing cut: the long message and the timestamps wrap
    assert max(len(line) for line in screen.splitlines()) <= 80


def test_help_renders_flags_without_a_value(baton_env: dict[str, str]) -> None:
    for args in (("--help",), ("doctor", "--help"), ("gateway", "list", "--help")):
        done = run_cli(baton_env, *args)
        assert done.returncode == 0, done.stderr
        assert "--help" in done.stdout
        assert "<bool>" not in done.stdout


def test_progress_draws_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from baton import terminal

    piped = Console(file=io.StringIO(), force_terminal=False)
    monkeypatch.setattr(terminal, "err", piped)
    with terminal.progress("verifying") as bar:
        assert bar is None
    assert piped.file.getvalue() == ""

    screen = io.StringIO()
    monkeypatch.setattr(terminal, "err", Console(file=screen, force_terminal=True, width=80))
    with terminal.progress("verifying", total=2) as bar:
        assert bar is not None
        bar.advance(bar.task_ids[0])
        bar.refresh()
    assert "verifying" in screen.getvalue()


def test_listing_cells_are_text_not_markup(baton_env: dict[str, str]) -> None:
    code = (
        "from baton.runtime import Runtime\n"
        "Runtime.open().receipts.append('test', {'note': '[bold]x[/bold] [false]'})\n"
    )
    subprocess.run([sys.executable, "-c", code], env=baton_env, check=True, timeout=300)
    done = run_cli(baton_env, "receipts", "list", "--oldest")
    assert done.returncode == 0, done.stderr
    assert "[bold]x[/bold] [false]" in done.stdout
