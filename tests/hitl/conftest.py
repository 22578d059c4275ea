"""Fixtures for the human-in-the-loop tests: an in-process runtime and broker on a fresh BATON_HOME."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.config import load_settings
from baton.hitl.broker import HitlBroker, get_broker
from baton.runtime import Runtime


@pytest.fixture
def runtime(baton_env: dict[str, str]) -> Iterator[Runtime]:
    """A runtime on the test's BATON_HOME (the same store a subprocess with baton_env uses)."""
    rt = Runtime.open(load_settings(baton_env))
    yield rt
    rt.close()


@pytest.fixture
def broker(runtime: Runtime) -> HitlBroker:
    """The runtime's broker."""
    return get_broker(runtime)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m baton ARGS`` in another process, against the same store."""
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class HttpServer:
    """``python -m baton serve --http 127.0.0.1:PORT`` as a subprocess."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "baton", "serve", "--http", f"127.0.0.1:{self.port}"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, log_path.read_text()
            try:
                httpx.get(f"{self.base_url}/inbox/login", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("the HTTP server did not start")

    def stop(self) -> None:
        """Terminate and reap the server."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


@pytest.fixture
def http_server_factory(tmp_path: Path) -> Iterator[Any]:
    """Start HTTP servers; every one is stopped at the end of the test."""
    started: list[HttpServer] = []

    def start(env: dict[str, str]) -> HttpServer:
        server = HttpServer(env, tmp_path / f"http-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
