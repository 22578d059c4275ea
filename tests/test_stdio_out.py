"""The stdout side of ``baton serve`` (baton.stdio_out): messages reach the client's pipe whole and in
order, while stray output written to fd 1 (a library's print, a child process) goes to stderr; fd 1 is the
wire again once the server stops. Run in a real subprocess so the descriptors are real pipes."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r"""
import os, subprocess, sys
import anyio
from baton.stdio_out import claimed_stdout

async def main():
    with claimed_stdout() as out:
        await out.write('{"id": 1}\n')
        os.write(1, b"stray write\n")
        print("stray print", flush=True)
        subprocess.run([sys.executable, "-c", "print('child output')"], check=True)
        await out.write('{"id": 2}\n' * 3)
        await out.flush()
    os.write(1, b"after\n")

anyio.run(main)
"""


def test_answers_go_to_the_wire_and_stray_output_to_stderr() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, check=True, timeout=3600)
    assert done.stdout.decode().splitlines() == ['{"id": 1}', '{"id": 2}', '{"id": 2}', '{"id": 2}', "after"]
    assert done.stderr.decode().splitlines() == ["stray write", "stray print", "child output"]


CALLBACK_PROGRAM = r"""
import sys
import anyio
from baton.stdio_out import claimed_stdout

seen = []

async def main():
    with claimed_stdout(lambda: seen.append("written")) as out:
        await out.write('{"id": 1}\n')
        sys.stderr.write(f"after first: {len(seen)}\n")
        await out.write('{"id": 2}\n')
    sys.stderr.write(f"after second: {len(seen)}\n")

anyio.run(main)
"""


def test_the_written_callback_runs_once_after_each_flushed_message() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CALLBACK_PROGRAM], capture_output=True, check=True, timeout=3600
    )
    assert done.stdout.decode().splitlines() == ['{"id": 1}', '{"id": 2}']
    assert done.stderr.decode().splitlines() == ["after first: 1", "after second: 2"]
