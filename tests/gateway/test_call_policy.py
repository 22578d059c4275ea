"""Per-call Cedar policy: pinned with the contract, checked at each call, dry-run over recorded calls."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.errors import GatewayError
from baton.gateway.policy.cedar_policy import check_call
from baton.gateway.policy.snapshot import live_adapters
from baton.runtime import Runtime
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway

from .conftest import TEST_SERVER

pytestmark = pytest.mark.timeout(1800)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def doc_example() -> str:
    """The Cedar example of docs/gateway.md, as written."""
    text = DOCS.read_text()
    return text.split("```cedar", 1)[1].split("```", 1)[0]


def test_the_docs_call_policy_pins_tests_and_decides_each_call(
    registry: NpmRegistryServer, baton_env: dict[str, str], tmp_path: Path
) -> None:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}

    def baton(*args: str) -> subprocess.CompletedProcess[str]:
        return run_gateway(env, *args)

    def ok(*args: str) -> str:
        done = baton(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    path = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}
    sql = {"type": "object", "properties": {"sql": {"type": "string"}}}
    tools = [
        {"name": "write_file", "description": "Write a file.", "inputSchema": path},
        {
            "name": "query",
            "description": "Run SQL.",
            "inputSchema": sql,
            "annotations": {"readOnlyHint": True},
        },
    ]
    ok(
        "lock",
        f"npm:{TEST_SERVER}",
        "--id",
        "db",
        "--entrypoint",
        f"python3 node_modules/{TEST_SERVER}/server.py",
        "--env",
        f"BATON_TEST_MCP_TOOLS={json.dumps(tools)}",
    )
    ok("verify", "db")
    ok("replay", "db", "--apply", "--record-contract")
    ok("allow", "db", "query")
    ok("allow", "db", "write_file", "--approval")

    home = Path(baton_env["BATON_HOME"])
    source = tmp_path / "policy.cedar"
    source.write_text("permit(principal, action, resource) when {")
    assert baton("policy", "pin", "db", str(source)).stderr.startswith("gateway_policy_error:")
    for count in ("0", "11"):  # no approvals is a plain permit, not an @approvals; 10 people at most
        source.write_text(f'@approvals("{count}")\npermit(principal, action, resource);\n')
        refused = baton("policy", "pin", "db", str(source)).stderr
        assert refused.startswith("gateway_policy_error:") and "from 1 to 10" in refused, refused
    source.write_text(doc_example())
    pinned = json.loads(ok("policy", "pin", "db", str(source), "--json"))
    assert (home / "adapters" / "db.cedar").read_text() == doc_example()

    calls = tmp_path / "calls.jsonl"
    recorded: list[dict[str, Any]] = [
        {"tool": "write_file", "arguments": {"path": "/data/out/report.txt", "text": "x"}},
        {"tool": "write_file", "arguments": {"path": "/etc/passwd", "text": "x"}},
        {"tool": "query", "arguments": {"sql": "SELECT * FROM t"}},
        {"tool": "query", "arguments": {"sql": "DROP TABLE t"}},
        {"tool": "query", "arguments": {}},
        {"tool": "delete_file", "arguments": {"path": "/data/out/old.txt"}},
        {"tool": "write_file", "arguments": {"path": "/data/out/../escape.txt", "text": "x"}},
        {"tool": "write_file", "arguments": {"path": "/data/out//./report.txt/", "text": "x"}},
    ]
    calls.write_text("".join(json.dumps(c) + "\n" for c in recorded))
    result = json.loads(ok("policy", "test", "db", str(calls), "--json"))
    assert result["call_policy_sha256"] == pinned["call_policy_sha256"]
    assert [(r["decision"], r.get("error_class")) for r in result["calls"]] == [
        ("permit", None),
        ("forbid", "gateway_policy_forbidden"),  # no policy permits it: default deny
        ("permit", None),
        ("forbid", "gateway_policy_forbidden"),  # explicitly forbidden
        ("error", "gateway_policy_error"),  # the policy cannot evaluate it: refused, never permitted
        ("approval", None),
        ("forbid", "gateway_policy_forbidden"),  # judged as /data/escape.txt, its canonical form
        ("permit", None),  # judged as /data/out/report.txt
    ]
    assert result["calls"][5]["approvals"] == 1
    human = ok("policy", "test", "db", str(calls))
    assert "4: query: forbid" in human and "6: delete_file: approval (1 approval(s))" in human

    # the pin holds: a changed file refuses replay and promote until pinned again
    (home / "adapters" / "db.cedar").write_text(doc_example() + "\npermit(principal, action, resource);\n")
    assert baton("replay", "db", "--apply").stderr.startswith("gateway_policy_error:")
    (home / "adapters" / "db.cedar").write_text(doc_example())
    ok("replay", "db", "--apply")
    promoted = json.loads(ok("promote", "db", "--json"))
    assert promoted["call_policy_sha256"] == pinned["call_policy_sha256"]

    # at call time the served snapshot's policy decides, whatever happens to the working file
    (home / "adapters" / "db.cedar").write_text("permit(principal, action, resource);")
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        (live,) = live_adapters(runtime)
        snapshot = live.bundle.parent
        assert check_call(live.policy, snapshot, "query", {"sql": "SELECT 1"}).effect == "permit"
        with pytest.raises(GatewayError) as dropped:
            check_call(live.policy, snapshot, "query", {"sql": "DROP TABLE t"})
        assert dropped.value.error_class == "gateway_policy_forbidden"
        with pytest.raises(GatewayError) as outside:
            check_call(live.policy, snapshot, "write_file", {"path": "/data/other/x", "text": "y"})
        assert outside.value.error_class == "gateway_policy_forbidden"
        approval = check_call(live.policy, snapshot, "write_file", {"path": "/data/out/x", "text": "y"})
        assert approval.effect == "permit" and approval.policy_sha256 == pinned["call_policy_sha256"]
        (snapshot / "call-policy.cedar").write_text("permit(principal, action, resource);")
        with pytest.raises(GatewayError) as tampered:  # a changed snapshot fails closed
            check_call(live.policy, snapshot, "query", {"sql": "SELECT 1"})
        assert tampered.value.error_class == "gateway_policy_error"
    finally:
        runtime.close()
