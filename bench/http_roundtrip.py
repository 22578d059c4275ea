"""Item 2: a cheap tool call's round trip over streamable HTTP, baton against the SDK's servers.

One ``httpx.Client`` per server keeps its connection and MCP session; each call is one POST whose
answer (JSON or one SSE event) is parsed the same way for every server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from contextlib import ExitStack, suppress
from typing import Any

import httpx

from bench._common import (
    INITIALIZE_PARAMS,
    PROTOCOL_VERSION,
    baton_env,
    request,
    temp_home,
)
from bench._peers import Target, http_targets, smoke
from bench.stdio_roundtrip import interleave, with_ratios

STARTUP_SECONDS = 30.0


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpClient:
    """A raw MCP client over streamable HTTP: POST one JSON-RPC message, read one answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30.0)
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        self._next_id = 0

    def post(self, message: dict[str, Any]) -> httpx.Response:
        """One POST with the session headers."""
        return self.http.post(self.url, content=json.dumps(message), headers=self.headers)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request and its result."""
        self._next_id += 1
        response = self.post(request(method, params, self._next_id))
        response.raise_for_status()
        message = parse_answer(response)
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        result: dict[str, Any] = message["result"]
        return result

    def initialize(self) -> None:
        """initialize (keeping the session id), then notifications/initialized."""
        self._next_id += 1
        response = self.post(request("initialize", INITIALIZE_PARAMS, self._next_id))
        response.raise_for_status()
        session = response.headers.get("mcp-session-id")
        if session:
            self.headers["mcp-session-id"] = session
        self.headers["mcp-protocol-version"] = PROTOCOL_VERSION
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).raise_for_status()

    def close(self) -> None:
        """End the session and the connection."""
        if "mcp-session-id" in self.headers:
            with suppress(httpx.HTTPError):
                self.http.delete(self.url, headers=self.headers)
        self.http.close()


def parse_answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body or in the SSE stream's data lines."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body: dict[str, Any] = response.json()
        return body
    for line in response.text.splitlines():
        if line.startswith("data:"):
            message: dict[str, Any] = json.loads(line[5:])
            if "id" in message:
                return message
    raise RuntimeError(f"no JSON-RPC answer in {response.text[:200]!r}")


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Poll until the port accepts connections (a server process offers no event to wait on)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {STARTUP_SECONDS} s")


def start(target: Target, stack: ExitStack) -> subprocess.Popen[bytes]:
    """Start an HTTP target without waiting for it; it is stopped when ``stack`` closes."""
    env = baton_env(stack.enter_context(temp_home())) if target.is_baton else None
    process = subprocess.Popen(
        target.command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stack.callback(stop, process)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server, killing it if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def connect(target: Target, process: subprocess.Popen[bytes], stack: ExitStack) -> HttpClient:
    """Wait for the target to listen and open an initialized session."""
    wait_listening(target.port, process)
    client = HttpClient(f"http://127.0.0.1:{target.port}/mcp")
    stack.callback(client.close)
    client.initialize()
    client.call("tools/list")
    return client


def run(iterations: int) -> dict[str, Any]:
    """Measure every HTTP target in interleaved blocks; ratios are against MCPServer."""
    targets = smoke(http_targets(free_port), iterations)
    with ExitStack() as stack:
        processes = [start(target, stack) for target in targets]  # they boot in parallel
        clients = [connect(t, p, stack) for t, p in zip(targets, processes, strict=True)]
        rows = interleave(clients, targets, iterations)
    return with_ratios(rows, "streamable HTTP tool-call round trip")
