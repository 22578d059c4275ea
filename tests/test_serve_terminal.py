"""``baton serve`` talks to a person on stderr and keeps stdout for JSON-RPC."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys


def read_stderr_until(process: subprocess.Popen[bytes], marker: bytes, seconds: float = 20) -> bytes:
    """Read the child's stderr until ``marker`` appears (or the child exits, or time is up)."""
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
        stdout, _ = process.communicate(timeout=20)
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
        assert "listening on http://127.0.0.1:" in seen
        base = seen.split("listening on ", 1)[1].split()[0]
        assert f"{base}/mcp" in seen
        assert f"{base}/inbox" in seen
        assert f"{base}/inbox/console" in seen
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=20)
    assert stdout == b""
