"""baton driven by MCP Inspector's CLI from npm (TypeScript SDK, AJV schema checks), a client nobody here wrote.

Every call is a fresh ``npx @modelcontextprotocol/inspector --cli`` process, as a person scripting baton
would run it: over stdio (the Inspector spawns ``baton serve``) in both protocol eras, and over streamable
HTTP with the agent's bearer token. The Inspector checks each ``structuredContent`` against the tool's
``outputSchema`` itself and exits 5 on a result with ``isError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SUITE_SETTINGS
from tests.servers import free_port, http_server

#: Pinned: the version this suite was written against (node 20 runs it despite its engines field).
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
#: The Inspector's exit status for a tool result with ``isError: true``.
TOOL_IS_ERROR = 5
AGENT_TOKEN = "agent-token-for-the-inspector-0123456789"
#: A hang guard for one Inspector run (npx may fetch the package first), never a margin.
RUN_GUARD_SECONDS = 300

pytestmark = [pytest.mark.slow, pytest.mark.needs("node", "npm-registry")]


def inspector(env: dict[str, str], *args: str, target: list[str] | None = None) -> tuple[int, Any, str]:
    """Run the Inspector CLI once: (exit status, the JSON it printed or None, its stderr)."""
    home = str(Path(env["BATON_HOME"]))
    suite = [
        part for name, value in SUITE_SETTINGS.items() if name in env for part in ("-e", f"{name}={value}")
    ]
    server = target or [
        "-e",
        f"BATON_HOME={home}",
        "-e",
        f"PYTHONPATH={env['PYTHONPATH']}",
        *suite,
        sys.executable,
        "-m",
        "baton",
        "serve",
    ]
    process = subprocess.run(
        ["npx", "--yes", INSPECTOR, "--cli", *server, "-q", "--format", "json", *args],
        env={**os.environ, "npm_config_update_notifier": "false"},
        capture_output=True,
        text=True,
        timeout=RUN_GUARD_SECONDS,
        check=False,
    )
    printed = json.loads(process.stdout) if process.stdout.strip() else None
    assert "Traceback" not in process.stderr, process.stderr  # the spawned baton's stderr reaches it on stdio
    return process.returncode, printed, process.stderr


def structured(printed: Any) -> dict[str, Any]:
    """The ``structuredContent`` of a printed ``tools/call`` result."""
    result = printed["result"]
    assert result["structuredContent"] == json.loads(result["content"][0]["text"])
    content: dict[str, Any] = result["structuredContent"]
    return content


def ask_approval(env: dict[str, str], ask: dict[str, Any]) -> tuple[int, Any]:
    """``mcp_request_admin_approval`` with ``ask`` through the Inspector CLI: (exit status, what it printed)."""
    call = ("--method", "tools/call", "--tool-name", "mcp_request_admin_approval")
    status, printed, _ = inspector(env, *call, "--tool-args-json", json.dumps(ask))
    return status, printed


def test_every_tool_is_listed_with_portable_schemas_in_both_eras(baton_env: dict[str, str]) -> None:
    listed: dict[str, set[str]] = {}
    for era in ("legacy", "modern"):
        # --strict exits 6 on an error-severity portability problem in any tool schema
        status, printed, stderr = inspector(
            baton_env, "--strict", "--protocol-era", era, "--method", "tools/list"
        )
        assert status == 0, stderr
        tools = printed["result"]["tools"]
        assert all(tool["outputSchema"]["type"] == "object" for tool in tools)
        assert all(tool["inputSchema"]["type"] == "object" for tool in tools)
        listed[era] = {tool["name"] for tool in tools}
    assert listed["legacy"] == listed["modern"]
    assert {"mcp_ping", "mcp_set_timer", "mcp_request_admin_approval", "mcp_spawn_subagent"} <= listed[
        "modern"
    ]


def test_a_timer_set_in_one_era_is_listed_and_cancelled_from_the_other(baton_env: dict[str, str]) -> None:
    timer = {"name": "inspector", "delay_seconds": 3600, "action": {"kind": "record"}}
    modern = ("--protocol-era", "modern", "--method", "tools/call")
    legacy = ("--protocol-era", "legacy", "--method", "tools/call")
    status, printed, stderr = inspector(
        baton_env, *modern, "--tool-name", "mcp_set_timer", "--tool-args-json", json.dumps(timer)
    )
    assert status == 0, stderr
    created = structured(printed)
    assert created["success"] is True
    timer_id = created["timer_id"]

    status, printed, stderr = inspector(baton_env, *legacy, "--tool-name", "mcp_list_timers")
    assert status == 0, stderr
    (listed,) = [t for t in structured(printed)["timers"] if t["timer_id"] == timer_id]
    assert listed["name"] == "inspector"

    status, printed, stderr = inspector(
        baton_env, *legacy, "--tool-name", "mcp_cancel_timer", "--tool-arg", f"timer_id={timer_id}"
    )
    assert status == 0, stderr
    assert structured(printed)["success"] is True

    # cancelled once: the second cancel is a typed error the Inspector sees as isError
    status, printed, _ = inspector(
        baton_env, *modern, "--tool-name", "mcp_cancel_timer", "--tool-arg", f"timer_id={timer_id}"
    )
    assert status == TOOL_IS_ERROR
    refused = structured(printed)
    assert (refused["success"], refused["error_class"]) == (False, "timer_already_cancelled")


def test_an_approval_nobody_decides_expires_unapproved(baton_env: dict[str, str]) -> None:
    status, printed = ask_approval(
        baton_env, {"request_message": "Drop the orders table?", "timeout_seconds": 1}
    )
    assert status == TOOL_IS_ERROR
    outcome = structured(printed)
    assert (outcome["approved"], outcome["status"], outcome["error_class"]) == (
        False,
        "expired",
        "hitl_timeout",
    )


def test_an_approval_nobody_is_told_of_answers_at_once_with_how_to_decide(baton_env: dict[str, str]) -> None:
    """The Inspector CLI sends no progress token and the home has no channel or console: by default the call
    answers at once, unapproved, naming the command a person runs (Inspector would cut a waiting call at 60 s)."""
    default = {k: v for k, v in baton_env.items() if k != "BATON_HITL_UNREACHED"}
    status, printed = ask_approval(default, {"request_message": "Drop the orders table?"})
    outcome = structured(printed)
    assert status == TOOL_IS_ERROR
    assert (outcome["error_class"], outcome["status"], outcome["reached_via"]) == (
        "hitl_unreachable",
        "pending",
        [],
    )
    assert f"baton hitl approve|reject|answer {outcome['request_id']}" in outcome["error"]


def test_over_http_the_agent_token_calls_and_a_wrong_one_is_refused(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN}
    bind = f"127.0.0.1:{free_port()}"
    url = f"http://{bind}/mcp"
    with http_server(env, bind, tmp_path):
        call = ("--transport", "http", "--method", "tools/call", "--tool-name", "mcp_ping")
        status, printed, stderr = inspector(
            env, *call, "--header", f"Authorization: Bearer {AGENT_TOKEN}", target=[url]
        )
        assert status == 0, stderr
        assert structured(printed)["success"] is True

        status, printed, stderr = inspector(
            env, *call, "--header", "Authorization: Bearer wrong", target=[url]
        )
        assert status != 0 and printed is None
        # the 401 sends the Inspector to an OAuth login it cannot open without a terminal: no call was made
        envelope = json.loads(stderr.strip().splitlines()[-1])
        assert envelope["error"]["code"] == "auth_required", stderr
        assert AGENT_TOKEN not in stderr
