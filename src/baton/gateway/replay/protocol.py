"""The replay's MCP client: bounded line reads, deterministic answers to server requests, clean shutdown.

A stdlib JSON-RPC loop rather than the SDK client on purpose: the replay must see every byte the
server writes (a 3 MiB line, a wrong id, a request before the answer) and decide about each itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from baton import __version__
from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json
from baton.gateway.policy.policy import ClientSpec

MAX_PROTOCOL_LINE_BYTES = 2 * 1024 * 1024
MAX_INTERLEAVED_MESSAGES = 64
#: Non-JSON lines tolerated before the first JSON-RPC message (a banner), and how much of each is kept.
MAX_NOISE_LINES = 32
NOISE_LINE_CHARS = 200
#: The one client identity baton shows external servers, in the replay and at run time alike.
CLIENT_NAME = "baton-gateway"


def initialize_params(client: ClientSpec) -> dict[str, Any]:
    """initialize's params: the pinned protocol version, the declared capabilities, baton's clientInfo.

    The replay and the runtime both send exactly this, so a server whose tool list depends on the
    client sees the same client twice.
    """
    return {
        "protocolVersion": client.protocol_version,
        "capabilities": dict(client.capabilities),
        "clientInfo": {"name": CLIENT_NAME, "version": __version__},
    }


@dataclass
class Session:
    """What the exchange observed, filled in as it goes (a failure receipt reports the partial record)."""

    server_requests: list[dict[str, str]] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    shutdown_mode: str = "not_started"
    exit_code: int | None = None
    stderr_tail: str = ""
    stderr: dict[str, Any] = field(default_factory=dict)
    #: Non-JSON lines the server wrote before its first JSON-RPC message (a banner), capped.
    stdout_noise: list[str] = field(default_factory=list)
    #: The stdout line a failure was about (capped), when one was.
    stdout_line: str | None = None
    #: The error line of the server's stderr (see :func:`baton.gateway.sandbox.stderr.headline`).
    stderr_headline: str | None = None
    #: Whether any JSON-RPC message arrived yet: after the first one, a non-JSON line is refused.
    spoken: bool = False
    #: Whether the server closed its stdout (it is exiting on its own: its exit status is waited for).
    stdout_closed: bool = False


def shown_line(line: bytes, limit: int = NOISE_LINE_CHARS) -> str:
    """A server's stdout line as text for receipts and the terminal: decoded, cut at ``limit`` characters."""
    text = line.decode("utf-8", errors="replace").rstrip("\r")
    return text if len(text) <= limit else text[:limit] + "…"


class JsonRpcPipe:
    """Newline-delimited JSON-RPC over a child's stdin/stdout with a hard cap on each line."""

    def __init__(self, process: subprocess.Popen[bytes], client: ClientSpec, session: Session) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.client = client
        self.session = session
        self.fd = process.stdout.fileno()
        self.buffer = bytearray()
        # one process's stdout: a retried start (an older protocol pinned) may print its banner again
        session.spoken, session.stdout_closed, session.stdout_noise = False, False, []

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; a closed pipe is a protocol failure."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(canonical_json(message).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise GatewayError("mcp_protocol_write_failed", "The server closed its stdin.") from None

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_PROTOCOL_LINE_BYTES:
                raise GatewayError("mcp_protocol_response_invalid", "The server wrote a line over 2 MiB.")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                raise GatewayError("mcp_protocol_response_timeout", "The server did not answer in time.")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.session.stdout_closed = True
                raise GatewayError(
                    "mcp_protocol_response_invalid", "The server closed stdout without answering."
                )
            self.buffer += chunk
        index = self.buffer.index(b"\n")
        line = bytes(self.buffer[:index])
        del self.buffer[: index + 1]
        if len(line) > MAX_PROTOCOL_LINE_BYTES:
            raise GatewayError("mcp_protocol_response_invalid", "The server wrote a line over 2 MiB.")
        return line

    def _answer(self, request: dict[str, Any]) -> None:
        method = str(request.get("method"))
        declared = self.client.capabilities
        if method == "ping":
            reply: dict[str, Any] = {"result": {}}
        elif method == "roots/list" and "roots" in declared:
            reply = {"result": {"roots": list(self.client.roots)}}
        else:
            reply = {"error": {"code": -32601, "message": f"{method} is not offered during a replay"}}
        self.session.server_requests.append(
            {"method": method, "answer": "result" if "result" in reply else "error"}
        )
        self.send({"jsonrpc": "2.0", "id": request["id"], **reply})

    def _message(self, line: bytes) -> dict[str, Any] | None:
        """One JSON-RPC message; None for a banner line before the first message (kept as noise)."""
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
            self.session.spoken = True
            return message
        if not self.session.spoken and len(self.session.stdout_noise) < MAX_NOISE_LINES:
            self.session.stdout_noise.append(shown_line(line))
            return None
        self.session.stdout_line = shown_line(line)
        what = "a message that is not JSON-RPC 2.0" if message is not None else "a line that is not JSON"
        raise GatewayError(
            "mcp_protocol_response_invalid",
            f"The server wrote {what} to stdout, where only JSON-RPC may go.",
            stdout_line=self.session.stdout_line,
        )

    def request(self, request_id: int, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a request and return its result, answering server requests that arrive first."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        for _ in range(MAX_INTERLEAVED_MESSAGES + MAX_NOISE_LINES):
            message = self._message(self._line(deadline))
            if message is None:
                continue
            if "method" in message:
                if "id" in message:
                    self._answer(message)
                else:
                    self.session.notifications.append(str(message["method"]))
                continue
            if (
                message.get("id") != request_id
                or "error" in message
                or not isinstance(message.get("result"), dict)
            ):
                raise GatewayError(
                    "mcp_protocol_response_invalid",
                    f"The answer to {method} has a wrong id, an error or no result.",
                )
            result: dict[str, Any] = message["result"]
            return result
        raise GatewayError(
            "mcp_protocol_response_invalid", f"The server sent too many messages before answering {method}."
        )


def exchange(pipe: JsonRpcPipe, timeout: float) -> tuple[dict[str, str], Any, dict[str, Any]]:
    """initialize (pinned version and capabilities), notifications/initialized, tools/list."""
    client = pipe.client
    initialize = pipe.request(1, "initialize", initialize_params(client), timeout)
    info = initialize.get("serverInfo")
    if not isinstance(info, dict):
        raise GatewayError("mcp_protocol_response_invalid", "initialize returned no serverInfo.")
    server = {
        "protocol_version": str(initialize.get("protocolVersion")),
        "server_name": str(info.get("name")),
        "server_version": str(info.get("version")),
    }
    if server["protocol_version"] != client.protocol_version:
        raise GatewayError(
            "mcp_initialize_contract_mismatch",
            f"The server answered protocol {server['protocol_version']}, not the pinned {client.protocol_version}.",
            answered=server["protocol_version"],
        )
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}})
    listed = pipe.request(2, "tools/list", {}, timeout)
    capabilities = initialize.get("capabilities")
    return server, listed.get("tools"), capabilities if isinstance(capabilities, dict) else {}


def shut_down(process: subprocess.Popen[bytes], session: Session, timeout: float) -> None:
    """Close stdin and wait for a clean exit within ``timeout``."""
    assert process.stdin is not None
    with contextlib.suppress(OSError):
        process.stdin.close()
    try:
        session.exit_code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GatewayError(
            "mcp_process_shutdown_timeout", f"The server was still running {timeout} s after stdin closed."
        ) from None
    session.shutdown_mode = "stdin_eof_clean_exit"
    if session.exit_code != 0:
        raise GatewayError("mcp_process_exit_invalid", f"The server exited with status {session.exit_code}.")


def stop(process: subprocess.Popen[bytes], session: Session, timeout: float) -> None:
    """After a failure: terminate, then kill, recording which it took.

    A server that closed its stdout is exiting by itself: its own exit status is waited for first, so a
    crash reads as the crash (``exit status: 1``), not as baton's SIGTERM."""
    if session.stdout_closed:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    if process.poll() is not None:
        if session.shutdown_mode == "not_started":
            session.shutdown_mode = "exited_before_shutdown"
        session.exit_code = process.returncode
        return
    process.terminate()
    try:
        session.exit_code = process.wait(timeout=timeout)
        session.shutdown_mode = "terminated_after_replay_error"
    except subprocess.TimeoutExpired:
        process.kill()
        session.exit_code = process.wait(timeout=timeout)
        session.shutdown_mode = "killed_after_replay_error"
