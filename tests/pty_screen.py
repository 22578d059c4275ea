"""What a person sees: ``python -m baton ARGS`` on a pseudo-terminal, its output drawn by a terminal emulator
(pyte), so an escape sequence in the output acts as it would in a real terminal window."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Callable

import pyte

from tests.cli_process import HANG_GUARD_SECONDS


def screen_of(
    env: dict[str, str],
    *args: str,
    columns: int = 200,
    rows: int = 50,
    until: Callable[[str], bool] | None = None,
) -> str:
    """The screen's text after ``baton ARGS`` ends (or, for a command that runs on, once ``until`` holds:
    then the process is stopped). stdout and stderr are the terminal."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", *args],
        env={**env, "COLUMNS": str(columns), "LINES": str(rows), "TERM": "xterm-256color"},
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    screen = pyte.Screen(columns, rows)
    stream = pyte.ByteStream(screen)
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            stream.feed(chunk)
            if until is not None and until(shown(screen)):
                break
    finally:
        if process.poll() is None and until is not None:
            process.terminate()
        process.wait(timeout=HANG_GUARD_SECONDS)
        os.close(controller)
    return shown(screen)


def shown(screen: pyte.Screen) -> str:
    """The screen's lines, trailing blanks trimmed."""
    return "\n".join(line.rstrip() for line in screen.display).rstrip()
