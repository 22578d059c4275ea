"""``baton serve`` talks to a person on stderr and keeps stdout for JSON-RPC."""

from __future__ import annotations

import os
import pty
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def read_stderr_until(process: subprocess.Popen[bytes], marker: bytes, seconds: float = 300) -> bytes:
    """Read the child's stderr until ``marker`` appears (or the child exits, or the hang guard is up)."""
    assert process.stderr is not None
    seen = b""
    fd = process.stderr.fileno()
    for _ in range(int(seconds * 10)):
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
            if marker in seen:
                break
    return seen


def test_on_a_terminal_serve_says_it_waits_for_a_client(baton_env: dict[str, str]) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", "serve"],
        env=baton_env,
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = read_stderr_until(process, b"Ctrl-C")
        assert b"waiting for an MCP client on stdin" in seen
        assert b"Ctrl-C stops it" in seen
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=300)
        os.close(controller)
        os.close(terminal)
    assert stdout == b""


def test_http_serve_names_its_urls_on_stderr(baton_env: dict[str, str]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", "serve", "--http", "127.0.0.1:0"],
        env=baton_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = read_stderr_until(process, b"Ctrl-C").decode()
        assert "listening on http://localhost:" in seen  # a host name, which passkeys accept
        base = seen.split("listening on ", 1)[1].split()[0]
        assert f"{base}/mcp" in seen
        assert f"{base}/inbox" in seen
        assert f"{base}/inbox/console" in seen
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=300)
    assert stdout == b""


@pytest.mark.needs("tmux")
def test_ctrl_c_in_a_terminal_ends_a_stdio_serve_at_once(baton_env: dict[str, str], tmp_path: Path) -> None:
    """In a real terminal (tmux), Ctrl-C stops ``baton serve`` on stdio without waiting for Enter or EOF."""
    session = f"baton-ctrl-c-{os.getpid()}"
    script = tmp_path / "run.sh"
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in baton_env.items())
    # the shell traps INT so that it outlives the server and prints the server's exit status
    script.write_text(
        f"{exports}trap 'true' INT\n{shlex.quote(sys.executable)} -m baton serve\necho EXITED=$?\nsleep 600\n"
    )
    tmux = ["tmux", "-L", session]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "30", f"bash --norc {script}"],
        check=True,
    )
    try:

        def screen() -> str:
            return subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
            ).stdout

        wait_for(lambda: "Ctrl-C stops it" in screen(), screen)
        wait_for(lambda: store_opened(baton_env), screen)  # the server is up and serving
        subprocess.run([*tmux, "send-keys", "-t", session, "C-c"], check=True)
        wait_for(lambda: "EXITED=" in screen(), screen)
        assert "EXITED=130" in screen(), screen()  # ended by the signal itself, no traceback
        assert "Traceback" not in screen()
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


def store_opened(env: dict[str, str]) -> bool:
    """Whether the store exists yet (the server opened it: it is past start-up)."""
    return (Path(env["BATON_HOME"]) / "baton.db").exists()


def wait_for(condition: Callable[[], bool], show: Callable[[], str], seconds: float = 120) -> None:
    """Poll ``condition`` until it holds; fail with the screen after a generous bound."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, show()
        time.sleep(0.1)
