"""Run ``python -m baton`` commands as a user does: another process, stdin closed, output captured."""

from __future__ import annotations

import subprocess
import sys

#: Only stops a hang: a CLI command here finishes in seconds, but a loaded CI machine can be slow.
HANG_GUARD_SECONDS = 300


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m baton ARGS`` to completion against ``env``'s store; a user never sees a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "baton", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def run_gateway(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m baton gateway ARGS``, as :func:`run_cli`."""
    return run_cli(env, "gateway", *args)
