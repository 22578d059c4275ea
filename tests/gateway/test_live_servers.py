"""Opt-in (``BATON_LIVE_REGISTRY=1``): real servers from the real npm registry and PyPI, end to end.

lock → verify → check → replay (pin) → allow one tool → replay → promote → a call through
``python -m baton serve`` with the official MCP client. Slow and networked, so never in CI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway import artifacts, stages
from baton.gateway.policy import load_policy, write_policy
from baton.gateway.promotion import promote
from baton.gateway.replay import replay
from baton.gateway.sandbox import BubblewrapSandbox
from baton.runtime import Runtime
from tests.conftest import BLANKED, SRC, call, stdio_session

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
    env = {k: v for k, v in os.environ.items() if k not in BLANKED}
    env.update(BATON_HOME=str(home), PYTHONPATH=str(SRC) + os.pathsep + env.get("PYTHONPATH", ""))
    async with stdio_session(env) as session:
        result = await call(session, f"{adapter_id}__{tool}", arguments)
    assert result["success"] is True, result
    assert expected in str(result)
