"""Helpers for the human-in-the-loop tests: an HTTP-server subprocess, a free port, waiting for pending requests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.conftest import call


async def pending_requests(session: Any, count: int = 1) -> list[dict[str, Any]]:
    """Poll mcp_list_pending_requests until at least ``count`` requests are listed."""
    with anyio.fail_after(300):  # only stops a hang
        while True:
            listed = await call(session, "mcp_list_pending_requests")
            if len(listed["requests"]) >= count:
                return list(listed["requests"])
            await anyio.sleep(0.05)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
        deadline = time.monotonic() + 300  # a guard against a hang, not a margin: CI machines are busy
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
                self.process.wait(300)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


async def goto(page: Any, url: str) -> Any:
    """``page.goto(url)``, again when an open list page's live reload aborted it (a new request, a decision
    elsewhere: the tab reloads itself, by design)."""
    from playwright.async_api import Error

    for attempt in range(5):
        try:
            return await page.goto(url)
        except Error as exc:
            aborted = "ERR_ABORTED" in str(exc) or "interrupted by another navigation" in str(exc)
            if not aborted or attempt == 4:
                raise
            await anyio.sleep(0.2)
    return None
