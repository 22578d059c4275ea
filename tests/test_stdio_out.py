"""The stdout side of ``baton serve`` (baton.wire.stdio_out): messages reach the client's pipe whole and in
order, while stray output written to fd 1 (a library's print, a child process) goes to stderr; fd 1 is the
wire again once the server stops. Run in a real subprocess so the descriptors are real pipes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = r"""
import os, subprocess, sys
import anyio
from baton.wire.stdio_out import claimed_stdout

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


BIG = r"""
import sys
import anyio
from baton.wire.stdio_out import claimed_stdout

async def main():
    with claimed_stdout() as out:
        sys.stderr.write(type(out).__name__ + "\n")
        for n in range(4):
            await out.write(str(n) * 300_000 + "\n")  # each larger than a pipe's buffer

anyio.run(main)
"""

CALLBACK_PROGRAM = r"""
import sys
import anyio
from baton.wire.stdio_out import claimed_stdout

seen = []

async def main():
    with claimed_stdout(lambda: seen.append("written")) as out:
        sys.stderr.write(type(out).__name__ + "\n")
        await out.write('{"id": 1}\n')
        sys.stderr.write(f"after first: {len(seen)}\n")
        await out.write('{"id": 2}\n')
    sys.stderr.write(f"after second: {len(seen)}\n")

anyio.run(main)
"""


def test_answers_larger_than_the_pipe_arrive_whole_through_a_pipe_and_a_file(tmp_path: Path) -> None:
    expected = [str(n) * 300_000 for n in range(4)]
    piped = subprocess.run([sys.executable, "-c", BIG], capture_output=True, check=True, timeout=3600)
    assert piped.stderr.decode().split() == ["LoopStdout"]
    assert piped.stdout.decode().splitlines() == expected
    stored = tmp_path / "out"
    with stored.open("wb") as file:
        to_file = subprocess.run(
            [sys.executable, "-c", BIG], stdout=file, stderr=subprocess.PIPE, check=True, timeout=3600
        )
    assert to_file.stderr.decode().split() == ["FlushedStdout"]
    assert stored.read_text().splitlines() == expected


GONE = r"""
import sys
import anyio
from baton.wire.stdio_out import claimed_stdout

async def main():
    with claimed_stdout() as out:
        sys.stdin.readline()  # the parent closed its reading end and says so
        try:
            for _ in range(100):
                await out.write("x" * 100_000 + "\n")
        except OSError as exc:
            sys.stderr.write(type(exc).__name__ + "\n")

anyio.run(main)
"""


def test_a_client_gone_is_a_broken_pipe_not_a_hang() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", GONE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdout.close()
    process.stdin.write(b"closed\n")
    process.stdin.close()
    with process:
        assert process.stderr.read().decode().split() == ["BrokenPipeError"]
        assert process.wait(timeout=3600) == 0


def test_stdout_shared_with_stderr_keeps_the_thread_write() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BIG],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=True,
        timeout=3600,
    )
    assert done.stdout.decode().splitlines() == ["FlushedStdout", *(str(n) * 300_000 for n in range(4))]


def test_the_written_callback_runs_once_after_each_message_on_the_loop_and_in_a_thread(
    tmp_path: Path,
) -> None:
    piped = subprocess.run(
        [sys.executable, "-c", CALLBACK_PROGRAM], capture_output=True, check=True, timeout=3600
    )
    assert piped.stdout.decode().splitlines() == ['{"id": 1}', '{"id": 2}']
    assert piped.stderr.decode().splitlines() == ["LoopStdout", "after first: 1", "after second: 2"]
    stored = tmp_path / "out"
    with stored.open("wb") as file:
        to_file = subprocess.run(
            [sys.executable, "-c", CALLBACK_PROGRAM],
            stdout=file,
            stderr=subprocess.PIPE,
            check=True,
            timeout=3600,
        )
    assert stored.read_text().splitlines() == ['{"id": 1}', '{"id": 2}']
    assert to_file.stderr.decode().splitlines() == ["FlushedStdout", "after first: 1", "after second: 2"]


def test_a_client_that_stops_reading_ends_baton_serve_quietly(baton_env: dict[str, str]) -> None:
    """The first answer with nowhere to go ends the server: exit 0, no error, no traceback."""
    from tests.raw_stdio import raw_stdio

    with raw_stdio(baton_env) as server:
        assert server.initialize()["result"]["serverInfo"]["name"] == "baton"
        assert server.process.stdout is not None
        server.process.stdout.close()  # the client's reading end is gone; stdin stays open
        server.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert server.process.wait(timeout=300) == 0
        assert "internal_error" not in server.stderr() and "Traceback" not in server.stderr()
