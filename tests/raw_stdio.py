"""A raw ``baton serve`` process on stdio, spoken to in hand-written JSON-RPC lines (no MCP client)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.servers import START_GUARD_SECONDS

#: The 2025-11-25 handshake as raw JSON-RPC messages (request id 1): lines on the pipe here, bodies for
#: tests that post JSON-RPC over HTTP by hand.
HANDSHAKE: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "baton-tests", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]

#: How long one message (or the exit) may take before the test calls the server hung: a guard against a
#: hang on a loaded CI machine, never a margin a test depends on.
HANG_GUARD_SECONDS = START_GUARD_SECONDS

_CHUNK = 65536


class RawStdio:
    """A running ``baton serve`` on stdio: write lines to its stdin, read JSON-RPC messages off its stdout."""

    def __init__(self, process: subprocess.Popen[bytes], stderr_path: Path) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout.fileno()
        self._stderr_path = stderr_path
        self._buffer = bytearray()

    def send(self, *messages: dict[str, Any]) -> None:
        """Write each message as one JSON line (``ensure_ascii``: a lone surrogate stays an escape)."""
        self.send_bytes("".join(json.dumps(message) + "\n" for message in messages).encode())

    def send_bytes(self, data: bytes) -> None:
        """Write ``data`` to the server's stdin as it is (hostile lines, partial lines, garbage)."""
        self._stdin.write(data)
        self._stdin.flush()

    def initialize(self) -> dict[str, Any]:
        """Send the handshake and return the reply to ``initialize``."""
        self.send(*HANDSHAKE)
        return self.reply(1)

    def receive(self) -> dict[str, Any]:
        """The next message on stdout; fails (with the server's stderr) on end of stream or a hang."""
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        scanned = 0
        while (end := self._buffer.find(b"\n", scanned)) < 0:
            scanned = len(self._buffer)
            if not self._fill(deadline):
                raise AssertionError(f"the server closed stdout\n{self.stderr_tail()}")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        message: dict[str, Any] = json.loads(line)
        return message

    def read_until(self, *request_ids: Any) -> list[dict[str, Any]]:
        """Every message read until a message with each of ``request_ids`` has been seen, in order."""
        messages: list[dict[str, Any]] = []
        missing = set(request_ids)
        while missing:
            messages.append(self.receive())
            missing.discard(messages[-1].get("id"))
        return messages

    def reply(self, request_id: Any) -> dict[str, Any]:
        """The message answering ``request_id``; messages before it are read and passed over."""
        return self.read_until(request_id)[-1]

    def close(self) -> int:
        """Close stdin (end of the session) and return the exit status once the server has exited."""
        self._stdin.close()
        return self.process.wait(timeout=HANG_GUARD_SECONDS)

    def kill(self) -> None:
        """SIGKILL the server (no chance to clean up) and reap it."""
        self.process.kill()
        self.process.wait(timeout=HANG_GUARD_SECONDS)

    def read_rest(self) -> bytes:
        """All that stdout still holds, up to its end: nothing, from a server that only speaks JSON-RPC."""
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while self._fill(deadline):
            pass
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

    def stderr_tail(self, characters: int = 3000) -> str:
        """The end of what the server wrote to stderr, for failure messages."""
        return self.stderr()[-characters:]

    def stderr(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self._stderr_path.read_text(errors="replace")

    def _fill(self, deadline: float) -> bool:
        """Append the next chunk of stdout to the buffer; False at end of stream."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"nothing from the server in {HANG_GUARD_SECONDS} s (hung?)\n{self.stderr_tail()}"
                )
            ready, _, _ = select.select([self._stdout], [], [], remaining)
            if ready:
                break
        chunk = os.read(self._stdout, _CHUNK)
        self._buffer += chunk
        return bool(chunk)

    def stop(self) -> None:
        """Kill the server if it still runs and close the pipes (the teardown, on every path)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self._stdin, self.process.stdout):
            with contextlib.suppress(BrokenPipeError):  # unflushed input to a dead server
                if pipe is not None:
                    pipe.close()


@contextmanager
def raw_stdio(env: dict[str, str], *args: str) -> Iterator[RawStdio]:
    """``python -m baton serve *args`` with ``env`` on raw pipes, its stderr kept; killed on the way out."""
    with tempfile.TemporaryDirectory(prefix="baton-raw-stdio-") as scratch:
        stderr_path = Path(scratch) / "stderr.log"
        with stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "baton", "serve", *args],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        server = RawStdio(process, stderr_path)
        try:
            yield server
        finally:
            server.stop()
