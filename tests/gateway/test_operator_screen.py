"""The operator's screen: ``gateway list`` at 80 columns (piped and on a terminal) keeps every id whole and
one line per plain adapter; ``promote`` prints a summary with the detail behind ``--json``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from baton.gateway.policy.policy_files import parse_policy, write_policy
from baton.testing.gateway_adapter import policy_document
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway
from tests.pty_screen import screen_of

from .conftest import TEST_SERVER

pytestmark = pytest.mark.timeout(1800)

ENTRY = f"python3 node_modules/{TEST_SERVER}/server.py"

#: Twelve adapters with ids as long as real ones (``modelcontextprotocol-server-…``), two with details.
IDS = [f"modelcontextprotocol-server-filesystem-{n:02d}" for n in range(12)]


@pytest.fixture
def home(baton_env: dict[str, str]) -> Path:
    """A BATON_HOME holding twelve drafted adapters; one mounts a directory, one narrows its resolver."""
    home = Path(baton_env["BATON_HOME"])
    for index, adapter_id in enumerate(IDS):
        extra: dict[str, object] = {}
        if index == 3:
            extra["mounts"] = [{"host": "/srv/notes/a-rather-long-directory-name", "sandbox": "/data"}]
        document = policy_document(adapter_id, b"tarball", **extra)
        if index == 5:
            document["resolution"] = {"constraints": ["content-type@^1", "mime-types@^2"]}
        write_policy(home / "adapters" / f"{adapter_id}.toml", parse_policy(document))
    return home


def check_layout(text: str) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    words = {word for line in lines for word in line.split()}
    assert set(IDS) <= words, "every id is shown whole, on one line"
    assert len(lines) <= 1 + len(IDS) + 2, lines  # a header, one line each, two detail lines
    assert any(
        line.startswith("  mounts: /srv/notes/a-rather-long-directory-name -> /data") for line in lines
    )
    assert any(line.startswith("  constraints: content-type@^1, mime-types@^2") for line in lines)


def test_gateway_list_fits_80_columns_on_a_pipe(home: Path, baton_env: dict[str, str]) -> None:
    done = run_gateway({**baton_env, "COLUMNS": "80"}, "list")
    assert done.returncode == 0, done.stderr
    check_layout(done.stdout)


def test_gateway_list_fits_80_columns_on_a_terminal(home: Path, baton_env: dict[str, str]) -> None:
    screen = screen_of(baton_env, "gateway", "list", columns=80, rows=60)
    check_layout(screen)


@pytest.mark.needs("bwrap")
def test_a_first_promote_prints_a_summary_and_the_full_detail_only_with_json(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
    schema = {"type": "object", "properties": {f"field_{n}": {"type": "string"} for n in range(8)}}
    tools = [{"name": f"read_{n:02d}", "description": "Reads.", "inputSchema": schema} for n in range(60)]
    tools.append({"name": "delete_file", "description": "Deletes.", "inputSchema": schema})
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}
    for args in (
        ("lock", f"npm:{TEST_SERVER}", "--id", "big", "--entrypoint", ENTRY,
         "--env", f"BATON_TEST_MCP_TOOLS={json.dumps(tools)}"),
        ("verify", "big"),
        ("replay", "big", "--apply", "--record-contract"),
        ("allow", "big", "read_00", "read_01"),
        ("allow", "big", "delete_file", "--approval"),
        ("replay", "big", "--apply"),
    ):  # fmt: skip
        done = run_gateway(env, *args)
        assert done.returncode == 0, done.stderr
    promoted = run_gateway(env, "promote", "big")
    assert promoted.returncode == 0, promoted.stderr
    lines = promoted.stdout.splitlines()
    assert len(lines) <= 8, lines
    assert lines[0] == "promoted big: serving 3 tool(s), 58 denied: delete_file, read_00, read_01"
    assert "each call waits for a human: delete_file" in lines
    assert "risky: delete_file (its name says 'delete'; each call approved by a human)" in lines
    assert any(line.startswith("tools added: ") and "… and 51 more" in line for line in lines)
    assert lines[-1] == "next: baton serve (its tools are listed as big__TOOL)"
    detail = json.loads(run_gateway(env, "demote", "big", "--json").stdout or "{}")
    assert detail.get("state") == "replayed"
    again = json.loads(run_gateway(env, "promote", "big", "--json").stdout)
    assert again["risky_tools"] == [
        {"tool": "delete_file", "reason": "its name says 'delete'", "approval": True}
    ]
    assert again["denied_count"] == 58


@pytest.mark.needs("bwrap")
def test_the_network_allowlist_and_the_destructive_exemption_are_flags_checked_at_once(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
    tools = [
        {"name": "read_note", "inputSchema": {"type": "object"}},
        {"name": "delete_file", "inputSchema": {"type": "object"}},
    ]
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}
    policy_file = Path(baton_env["BATON_HOME"]) / "adapters" / "net.toml"

    def baton(*args: str, code: int = 0) -> str:
        done = run_gateway(env, *args)
        assert done.returncode == code, done.stderr
        return done.stdout if code == 0 else done.stderr

    baton("lock", f"npm:{TEST_SERVER}", "--id", "net", "--entrypoint", ENTRY,
          "--env", f"BATON_TEST_MCP_TOOLS={json.dumps(tools)}")  # fmt: skip
    baton("verify", "net")
    baton("replay", "net", "--apply", "--record-contract")

    refused = baton("allow", "net", "delete_file", code=1)
    assert refused.startswith("adapter_destructive_tool_unapproved:") and "--without-approval" in refused
    assert "next: baton gateway allow net delete_file --approval" in refused
    assert baton("allow", "net", "read_note", "--without-approval", code=1).startswith(
        "adapter_policy_invalid:"
    )
    both = baton("allow", "net", "delete_file", "--approval", "--without-approval", code=1)
    assert both.startswith("invalid_arguments:")
    shown = baton("allow", "net", "delete_file", "--without-approval")
    assert "destructive without approval (the owner's choice): delete_file" in shown
    policy = tomllib.loads(policy_file.read_text())
    assert policy["tools"]["allow_destructive_without_approval"] == ["delete_file"]
    assert policy["tools"].get("approval_required", []) == []

    assert baton("policy", "network", "net", "ftp://example.org", code=1).startswith(
        "adapter_policy_invalid:"
    )
    assert baton("policy", "network", "net", code=1).startswith("invalid_arguments:")
    granted = baton("policy", "network", "net", "https://example.org", "http://127.0.0.1:8080/")
    assert "network at run time: allowlist: https://example.org, http://127.0.0.1:8080" in granted
    runtime = tomllib.loads(policy_file.read_text())["runtime"]
    assert (runtime["network"], runtime["allowed_origins"]) == (
        "allowlist",
        ["https://example.org", "http://127.0.0.1:8080"],
    )
    assert baton("replay", "net", "--apply").splitlines()[-1] == "next: baton gateway promote net"
    baton("policy", "network", "net", "--none")
    runtime = tomllib.loads(policy_file.read_text())["runtime"]
    assert runtime["network"] == "none" and runtime.get("allowed_origins", []) == []
