"""Starting baton server processes for tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: How long a server may take to start or stop before the test calls it hung: a guard against a hang on a
#: loaded CI machine, never a margin a test depends on.
START_GUARD_SECONDS = 300


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
        deadline = time.monotonic() + START_GUARD_SECONDS
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
        try:
            process.wait(timeout=START_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def uvicorn_in_thread(app: object) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn on 127.0.0.1 (an ephemeral port) in a thread; yields its base URL."""
    import threading

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
