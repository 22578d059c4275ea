"""The stdin lines of ``baton serve`` (baton.wire.stdio_in): read on the event loop from a pipe or a socket,
in a worker thread from a file or a terminal, and the same lines either way. Each case runs a real
subprocess whose stdin is a real pipe, socket, file or pseudo-terminal; the parent writes the next bytes
only after the child reported the line before, so chunk boundaries fall where the test puts them."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PROGRAM = r"""
import json, sys
import anyio
from baton.wire.stdio_guard import _stdin_lines

async def main():
    out = sys.stderr if sys.argv[2:] == ["stderr"] else sys.stdout
    lines = _stdin_lines(int(sys.argv[1]))
    print(json.dumps(type(lines).__name__), file=out, flush=True)
    while True:
        line, oversized = await lines.read()
        print(json.dumps([line, oversized]), file=out, flush=True)
        if not line and not oversized:
            break
    lines.close()

anyio.run(main)
"""

LIMIT = 64
#: Every edge in one input: CRLF and lone CR endings, invalid UTF-8 (a stray byte, a cut sequence, a
#: surrogate's encoding), a blank line, a line of exactly the limit, one just over it (with its id), a
#: multi-byte line under the limit in characters but over it in bytes, and a last line without a newline.
EDGES = (
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n'
    b"lone\rcarriage\n"
    b"bad \xff byte \xe2\x82 cut \xed\xa0\x80 surrogate\n"
    b"\n"
    + b"x" * LIMIT
    + b"\n"
    + b'{"id":7,"pad":"'
    + b"y" * LIMIT
    + b'"}\n'
    + "é".encode() * (LIMIT - 1)
    + b"\n"
    + b"last, no newline \xc3"
)


def _spawn(stdin: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(LIMIT)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _piped_on_the_loop() -> subprocess.Popen[bytes]:
    """The reader on a pipe, once it said it reads on the event loop (``LoopLines``)."""
    process = _spawn(subprocess.PIPE)
    assert _next(process) == "LoopLines"
    return process


def _reports(process: subprocess.Popen[bytes]) -> list[Any]:
    process.stdin = None  # closed by the test already: communicate would flush it
    out, err = process.communicate(timeout=3600)
    assert process.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


def _next(process: subprocess.Popen[bytes]) -> Any:
    assert process.stdout is not None
    return json.loads(process.stdout.readline())


def test_a_pipe_is_read_on_the_loop_and_gives_the_lines_a_file_gives(tmp_path: Path) -> None:
    stored = tmp_path / "input"
    stored.write_bytes(EDGES)
    with stored.open("rb") as file:
        from_file = _reports(_spawn(file))
    piped = _spawn(subprocess.PIPE)
    assert piped.stdin is not None
    piped.stdin.write(EDGES)
    piped.stdin.close()
    from_pipe = _reports(piped)

    assert from_file[0] == "ThreadLines" and from_pipe[0] == "LoopLines"
    assert from_pipe[1:] == from_file[1:]
    assert from_pipe[1:] == [
        ['{"jsonrpc":"2.0","id":1,"method":"ping"}\n', False],
        ["lone\n", False],
        ["carriage\n", False],
        ["bad \ufffd byte \ufffd cut \ufffd\ufffd\ufffd surrogate\n", False],
        ["\n", False],
        ["x" * LIMIT + "\n", False],
        ['{"id":7,"pad":"' + "y" * (LIMIT + 1 - 15), True],
        ["é" * (LIMIT - 1) + "\n", False],
        ["last, no newline \ufffd", False],
        ["", False],
    ]


def test_a_crlf_split_across_reads_is_one_ending() -> None:
    process = _piped_on_the_loop()
    assert process.stdin is not None
    process.stdin.write(b"first\r")
    process.stdin.flush()
    assert _next(process) == ["first\n", False]
    process.stdin.write(b"\nsecond\n")
    process.stdin.close()
    assert _reports(process) == [["second\n", False], ["", False]]


def test_an_oversized_line_is_reported_before_its_end_and_the_rest_is_dropped() -> None:
    process = _piped_on_the_loop()
    assert process.stdin is not None
    # the line's head only: already over the limit, with no newline yet
    process.stdin.write(b'{"id":"big","x":"' + b"z" * (LIMIT * 50))
    process.stdin.flush()
    line, oversized = _next(process)
    assert oversized is True and line.startswith('{"id":"big"')
    # the rest of it, across several writes, then a real line
    process.stdin.write(b"z" * 200_000)
    process.stdin.flush()
    process.stdin.write(b'z"}\r')
    process.stdin.flush()
    process.stdin.write(b'\n{"id":2}\n')
    process.stdin.close()
    assert _reports(process) == [['{"id":2}\n', False], ["", False]]


def test_an_oversized_line_of_multibyte_characters_is_counted_in_characters() -> None:
    process = _piped_on_the_loop()
    assert process.stdin is not None
    # LIMIT characters in 2 * LIMIT bytes, no newline yet: not too long
    process.stdin.write("é".encode() * LIMIT)
    process.stdin.flush()
    process.stdin.write("é\n".encode())  # one character more: too long
    process.stdin.close()
    assert _reports(process) == [["é" * (LIMIT + 1), True], ["", False]]


def test_end_of_input_on_an_empty_pipe() -> None:
    process = _spawn(subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.close()
    assert _reports(process) == ["LoopLines", ["", False]]


def test_a_socket_is_read_on_the_loop() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = _spawn(theirs.fileno())
        theirs.close()
        ours.sendall(b'{"id":1}\n{"id":2}')
        ours.shutdown(socket.SHUT_WR)
        assert _reports(process) == ["LoopLines", ['{"id":1}\n', False], ['{"id":2}', False], ["", False]]


def test_a_terminal_keeps_the_thread_path() -> None:
    controller, terminal = pty.openpty()
    try:
        process = _spawn(terminal)
        os.close(terminal)
        assert _next(process) == "ThreadLines"
        os.write(controller, b'{"id":1}\n\x04')  # a line, then end-of-file on the terminal
        assert _reports(process) == [['{"id":1}\n', False], ["", False]]
    finally:
        os.close(controller)


def test_a_socket_that_is_also_stdout_keeps_the_thread_path() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = subprocess.Popen(
            [sys.executable, "-c", PROGRAM, str(LIMIT), "stderr"],
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=subprocess.PIPE,
        )
        theirs.close()
        ours.sendall(b'{"id":1}\n')
        ours.shutdown(socket.SHUT_WR)
        with process:
            assert process.stderr is not None
            reports = [json.loads(line) for line in process.stderr.read().decode().splitlines()]
            assert process.wait(timeout=3600) == 0
    assert reports == ["ThreadLines", ['{"id":1}\n', False], ["", False]]
