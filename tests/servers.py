"""Starting baton server processes for tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The 2025-11-25 handshake as raw JSON-RPC lines (request id 1), for tests that speak to the pipe directly.
HANDSHAKE = [
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(env: dict[str, str], bind: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``baton serve --http`` in a subprocess, yielded once its port accepts connections."""
    log_path = tmp_path / f"serve-{bind.replace(':', '_')}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "baton", "serve", "--http", bind],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    host, port = bind.rsplit(":", 1)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                with socket.create_connection((host, int(port)), timeout=0.2):
                    break
            except OSError:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)
