"""Opt-in (``BATON_LIVE_REGISTRY=1``): real servers from the real npm registry and PyPI, end to end.

lock → verify → check → replay (pin) → allow one tool → replay → promote → a call through
``python -m baton serve`` with the official MCP client. Slow and networked, so never in CI.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from baton.config import load_settings
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy.policy_files import load_policy, write_policy
from baton.gateway.replay.replay import replay
from baton.gateway.sandbox.sandbox import BubblewrapSandbox
from baton.gateway.serving.promotion import promote
from baton.runtime import Runtime
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
    pytest.mark.skipif(os.environ.get("BATON_LIVE_REGISTRY") != "1", reason="set BATON_LIVE_REGISTRY=1"),
    pytest.mark.skipif(BubblewrapSandbox().unavailable_reason() is not None, reason="bubblewrap unavailable"),
]

SERVERS = [
    (
        "npm:@modelcontextprotocol/server-everything",
        "mcp-servers/everything",
        "echo",
        {"message": "hi baton"},
        "hi baton",
    ),
    (
        "pypi:mcp-server-time",
        "mcp-time",
        "convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        "21:00",
    ),
]


@pytest.mark.parametrize(("candidate", "server_name", "tool", "arguments", "expected"), SERVERS)
async def test_a_real_server_is_locked_replayed_promoted_and_called_through_baton_serve(
    tmp_path: Path, candidate: str, server_name: str, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    home = tmp_path / "home"
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        locked = artifacts.lock(runtime, candidate)
        adapter_id = locked["adapter_id"]
        assert stages.verify(runtime, adapter_id)["status"] == "completed_verified"
        assert stages.check(runtime, adapter_id)["status"] == "completed_check_mode_no_runtime_execution"
        first = replay(runtime, adapter_id, apply=True, record=True)["protocol_observation"]
        assert first["server_name"] == server_name and tool in [d for d in first["adapter_allowed_tools"]] + [
            tool
        ]
        path = Path(locked["policy_path"])
        policy, _ = load_policy(path)
        names = set(policy.tools.denied)
        tools = policy.tools.model_copy(update={"allowed": [tool], "denied": sorted(names - {tool})})
        write_policy(path, policy.model_copy(update={"tools": tools}))
        second = replay(runtime, adapter_id, apply=True)["protocol_observation"]
        assert second["tool_name_set_sha256"] == first["tool_name_set_sha256"]
        promote(runtime, adapter_id)
    finally:
        runtime.close()
    env = baton_environ(home)
    async with stdio_session(env) as session:
        result = await call(session, f"{adapter_id}__{tool}", arguments)
    assert result["success"] is True, result
    assert expected in str(result)


def _live_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    env = baton_environ(home)
    return home, env


def _govern(
    home: Path,
    candidate: str,
    arguments: list[str],
    runtime_update: dict[str, Any],
    allowed: list[str],
    exempt: list[str],
) -> str:
    """Lock, verify, check, pin a draft with ``runtime_update``, allow ``allowed``, replay and promote."""
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        locked = artifacts.lock(runtime, candidate, arguments=arguments)
        adapter_id, path = locked["adapter_id"], Path(locked["policy_path"])
        raw = tomllib.loads(path.read_text())
        raw["runtime"].update(runtime_update)
        path.write_text(tomli_w.dumps(raw))
        artifacts.lock(runtime, adapter_id)
        stages.verify(runtime, adapter_id)
        stages.check(runtime, adapter_id)
        replay(runtime, adapter_id, apply=True, record=True)
        policy, _ = load_policy(path)
        names = set(policy.tools.denied)
        assert set(allowed) <= names, names
        tools = policy.tools.model_copy(
            update={
                "allowed": allowed,
                "denied": sorted(names - set(allowed)),
                "allow_destructive_without_approval": exempt,
            }
        )
        write_policy(path, policy.model_copy(update={"tools": tools}))
        replay(runtime, adapter_id, apply=True)
        promote(runtime, adapter_id)
        return adapter_id
    finally:
        runtime.close()


async def test_server_filesystem_reads_a_read_only_mount_and_cannot_write_it(tmp_path: Path) -> None:
    home, env = _live_home(tmp_path)
    data = Path(tempfile.mkdtemp(prefix="baton-live-data-"))
    data.chmod(0o755)
    (data / "hello.txt").write_text("hello from the host\n")
    (data / "hello.txt").chmod(0o644)
    mounts = [{"host": str(data), "sandbox": "/data", "mode": "ro"}]
    adapter_id = _govern(
        home,
        "npm:@modelcontextprotocol/server-filesystem",
        ["/data"],
        {"mounts": mounts},
        ["list_directory", "read_text_file", "write_file"],
        ["write_file"],
    )
    async with stdio_session(env) as session:
        listed = await call(session, f"{adapter_id}__list_directory", {"path": "/data"})
        read = await call(session, f"{adapter_id}__read_text_file", {"path": "/data/hello.txt"})
        written = await call(session, f"{adapter_id}__write_file", {"path": "/data/new.txt", "content": "x"})
        outside = await call(session, f"{adapter_id}__read_text_file", {"path": "/etc/passwd"})
    assert "hello.txt" in json.dumps(listed) and "hello from the host" in json.dumps(read)
    assert "EROFS" in json.dumps(written) or "read-only" in json.dumps(written).lower()
    assert not (data / "new.txt").exists()
    assert "root:" not in json.dumps(outside)


async def test_server_memory_keeps_its_graph_in_a_read_write_mount(tmp_path: Path) -> None:
    home, env = _live_home(tmp_path)
    state_dir = Path(tempfile.mkdtemp(prefix="baton-live-state-"))
    state_dir.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(state_dir, 65534, 65534)
    update = {
        "mounts": [{"host": str(state_dir), "sandbox": "/state", "mode": "rw"}],
        "env": {"MEMORY_FILE_PATH": "/state/memory.jsonl"},
    }
    adapter_id = _govern(
        home,
        "npm:@modelcontextprotocol/server-memory",
        [],
        update,
        ["create_entities", "read_graph"],
        ["create_entities"],
    )
    entity = {"name": "baton", "entityType": "project", "observations": ["governed"]}
    async with stdio_session(env) as session:
        await call(session, f"{adapter_id}__create_entities", {"entities": [entity]})
        graph = await call(session, f"{adapter_id}__read_graph", {})
    assert "governed" in json.dumps(graph)
    assert "governed" in (state_dir / "memory.jsonl").read_text()


async def test_mcp_server_fetch_reaches_only_an_allowed_loopback_origin(tmp_path: Path) -> None:
    """Its full PyPI closure, the isolated interpreter, and egress through baton's allowlist proxy."""
    import http.server
    import socketserver
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body><h1>baton live page</h1></body></html>" if self.path == "/" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            """Quiet."""

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        home, env = _live_home(tmp_path)
        adapter_id = _govern(
            home,
            "pypi:mcp-server-fetch",
            ["--allow-private-ips"],  # the server refuses loopback addresses by itself otherwise
            {"network": "allowlist", "allowed_origins": [origin]},
            ["fetch"],
            [],
        )
        async with stdio_session(env) as session:
            # raw: its simplifier (readabilipy) tries `npm install` at run time, which the egress refuses
            allowed = await call(session, f"{adapter_id}__fetch", {"url": origin + "/", "raw": True})
            other = await call(session, f"{adapter_id}__fetch", {"url": "http://127.0.0.1:9/", "raw": True})
    finally:
        server.shutdown()
        server.server_close()
    assert "baton live page" in json.dumps(allowed), allowed
    assert "baton live page" not in json.dumps(other)


def test_mcp_server_sqlite_replays_when_its_loose_mcp_range_is_constrained(tmp_path: Path) -> None:
    """``mcp>=1`` admits mcp 2, which the server no longer runs on; ``--constraint 'mcp<2'`` fixes it."""
    home, _ = _live_home(tmp_path)
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        arguments = ["--db-path", "/tmp/mcp.db"]
        locked = artifacts.lock(runtime, "pypi:mcp-server-sqlite", arguments=arguments, constraints=["mcp<2"])
        assert any(p.startswith("mcp@1.") for p in locked["packages"]), locked["packages"]
        adapter_id = locked["adapter_id"]
        stages.verify(runtime, adapter_id)
        observed = replay(runtime, adapter_id, apply=True, record=True)["protocol_observation"]
        assert observed["server_name"] == "sqlite" and observed["tool_count"] >= 5
    finally:
        runtime.close()


async def test_a_subagent_calls_a_registry_servers_tool_through_baton_serve(tmp_path: Path) -> None:
    """A governed subagent's model asks for server-everything's echo; the call runs in its sandbox."""
    from baton.testing import Behavior, FakeLLMServer

    home, env = _live_home(tmp_path)
    adapter_id = _govern(home, "npm:@modelcontextprotocol/server-everything", [], {}, ["echo"], [])
    tool = f"{adapter_id}__echo"
    with FakeLLMServer() as model:
        model.when(
            "LIVE-ECHO", Behavior.calling(tool, {"message": "hi from a subagent"}, then="{tool_results}")
        )
        env.update(
            COLLAB_PROVIDER="openai-compatible",
            OPENAI_MODEL="loopback",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="",
        )
        async with stdio_session(env) as session:
            result = await call(session, "mcp_spawn_subagent", {"task": "LIVE-ECHO please", "tools": [tool]})
    assert result["success"] is True, result
    assert "hi from a subagent" in result["result"]
