"""Which servers each benchmark runs, and how to start them."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from bench._common import PEER_VENV_PYTHON, baton_command, peer_command


@dataclass(frozen=True)
class Target:
    """One server under test: how to start it and which tool call is its cheap call."""

    name: str
    command: list[str]
    tool: str
    arguments: dict[str, str]
    is_baton: bool = False
    port: int = 0
    #: Part of the one-iteration smoke (the floor, MCPServer and baton: enough for every ratio).
    essential: bool = False


def fastmcp_python() -> str | None:
    """The interpreter that can import fastmcp: this venv, else /work/bench-venv, else None."""
    if importlib.util.find_spec("fastmcp") is not None:
        return None
    if PEER_VENV_PYTHON.exists():
        probe = subprocess.run(
            [str(PEER_VENV_PYTHON), "-c", "import fastmcp"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return str(PEER_VENV_PYTHON)
    return ""


def stdio_targets(include_fastmcp: bool = True) -> list[Target]:
    """The floor, the SDK's two servers, FastMCP (when installed) and baton's two cheap tools."""
    echo = {"text": "ping"}
    targets = [
        Target(
            "floor (hand-written JSON-RPC)", peer_command("floor_server.py"), "echo", echo, essential=True
        ),
        Target("mcp low-level Server", peer_command("lowlevel_server.py"), "echo", echo),
        Target("mcp MCPServer", peer_command("mcpserver_server.py"), "echo", echo, essential=True),
    ]
    python = fastmcp_python()
    if include_fastmcp and python != "":
        targets.append(Target("FastMCP", peer_command("fastmcp_server.py", python=python), "echo", echo))
    targets += [
        Target(
            "baton mcp_ping", baton_command(), "mcp_ping", {"message": "ping"}, is_baton=True, essential=True
        ),
        Target("baton mcp_list_subagents", baton_command(), "mcp_list_subagents", {}, is_baton=True),
        Target(
            "baton mcp_list_pending_requests", baton_command(), "mcp_list_pending_requests", {}, is_baton=True
        ),
    ]
    return targets


def http_targets(next_port: Callable[[], int]) -> list[Target]:
    """Servers that speak streamable HTTP, each on its own port of 127.0.0.1 (the floor has no HTTP form)."""
    echo = {"text": "ping"}
    targets = []
    for name, script in (
        ("mcp low-level Server", "lowlevel_server.py"),
        ("mcp MCPServer", "mcpserver_server.py"),
    ):
        port = next_port()
        command = peer_command(script, "--http", str(port))
        targets.append(Target(name, command, "echo", echo, port=port, essential="MCPServer" in name))
    python = fastmcp_python()
    if python != "":
        port = next_port()
        command = peer_command("fastmcp_server.py", "--http", str(port), python=python)
        targets.append(Target("FastMCP", command, "echo", echo, port=port))
    port = next_port()
    baton = baton_command("--http", f"127.0.0.1:{port}")
    targets.append(
        Target(
            "baton mcp_ping", baton, "mcp_ping", {"message": "ping"}, is_baton=True, port=port, essential=True
        )
    )
    return targets


def smoke(targets: list[Target], iterations: int) -> list[Target]:
    """Only the essential targets in a one-iteration smoke run (every ratio, fewer processes)."""
    return [t for t in targets if t.essential] if iterations <= 1 else targets
