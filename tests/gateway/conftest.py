"""Gateway fixtures: a loopback npm registry, an isolated runtime and policies for the test MCP server."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import parse_policy, write_policy
from baton.runtime import Runtime
from baton.testing import gateway_adapter
from baton.testing.gateway_adapter import TEST_SERVER
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball

__all__ = ["TEST_SERVER"]  # re-exported for the gateway tests


@pytest.fixture
def registry() -> Iterator[NpmRegistryServer]:
    """A real npm-protocol registry on 127.0.0.1."""
    with NpmRegistryServer() as server:
        yield server


@pytest.fixture
def runtime(tmp_path: Path, registry: NpmRegistryServer) -> Iterator[Runtime]:
    """A runtime with its own BATON_HOME whose npm registry is the loopback one."""
    settings = load_settings({"BATON_HOME": str(tmp_path / "home"), "BATON_NPM_REGISTRY": registry.url})
    opened = Runtime.open(settings)
    yield opened
    opened.close()


def policy_document(adapter_id: str, tarball: bytes, **runtime: Any) -> dict[str, Any]:
    """The shared test-server policy, allowing ``echo`` and denying ``delete_everything``."""
    tools = {"allowed": ["echo"], "denied": ["delete_everything"]}
    return gateway_adapter.policy_document(adapter_id, tarball, tool_policy=tools, **runtime)


def publish_server(registry: NpmRegistryServer, tarball: bytes | None = None) -> bytes:
    """Publish the test MCP server (or other bytes under its name) and return the tarball."""
    tarball = tarball if tarball is not None else build_tarball(package_files())
    registry.publish(TEST_SERVER, "1.0.0", tarball, bin={TEST_SERVER: "server.py"})
    return tarball


def install_policy(runtime: Runtime, document: dict[str, Any], *, check_expiry: bool = True) -> Path:
    """Write a policy into BATON_HOME/adapters and return its path."""
    policy: Policy = parse_policy(document, check_expiry=check_expiry)
    path = runtime.settings.home / "adapters" / f"{policy.id}.toml"
    write_policy(path, policy)
    return path


class Page(http.server.BaseHTTPRequestHandler):
    """One page whose title and heading name the server it came from."""

    def do_GET(self) -> None:
        title = self.server.title  # type: ignore[attr-defined]
        data = f"<html><head><title>{title}</title></head><body><h1>Hello {title}</h1></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def pages() -> Iterator[dict[str, str]]:
    """Two pages on 127.0.0.1: ``allowed`` (a policy names its origin) and ``other`` (none does)."""
    servers = {}
    for name in ("allowed", "other"):
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Page)
        server.title = f"{name}-page"  # type: ignore[attr-defined]
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield {name: f"http://127.0.0.1:{s.server_address[1]}" for name, s in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()
