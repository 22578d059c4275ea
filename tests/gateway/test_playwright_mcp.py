"""The real @playwright/mcp from npm: locked, verified and replayed under bubblewrap with no network."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.policy import state
from baton.gateway.policy.policy_files import load_policy
from baton.gateway.replay.extract import materialize
from baton.gateway.replay.observation import sandbox_spec
from baton.gateway.sandbox.sandbox import BubblewrapSandbox
from baton.runtime import Runtime
from tests.cli_process import run_gateway
from tests.conftest import baton_environ
from tests.needs import require

PACKAGE = "@playwright/mcp"
VERSION = "0.0.83"
ARGUMENTS = [
    "--headless",
    "--isolated",
    "--output-dir",
    "/tmp/mcp-output",
    "--executable-path",
    "/nonexistent/browser",
]
NODE_PROBE = r"""
const fs = require("fs"), net = require("net");
const status = Object.fromEntries(fs.readFileSync("/proc/self/status", "utf8").trim().split("\n").map(l => l.split(":\t")));
const result = {uid: process.getuid(), gid: process.getgid(), capEff: status.CapEff.trim(),
  interfaces: fs.readFileSync("/proc/net/dev", "utf8").trim().split("\n").slice(2).map(l => l.split(":")[0].trim())};
for (const [key, path] of [["writeRoot", "/probe"], ["writeWork", "/work/node_modules/probe"]]) {
  try { fs.writeFileSync(path, "x"); result[key] = "ok"; } catch (e) { result[key] = e.code; }
}
const socket = net.connect({host: "1.1.1.1", port: 53});
socket.setTimeout(3000, () => { result.connect = "timeout"; socket.destroy(); done(); });
socket.on("connect", () => { result.connect = "ok"; socket.destroy(); done(); });
socket.on("error", e => { result.connect = e.code; done(); });
function done() { console.log(JSON.stringify(result)); process.exit(0); }
"""

pytestmark = pytest.mark.needs("node", "bwrap", "npm-registry")


def cache_dir(rootpath: Path) -> Path:
    return Path(os.environ.get("BATON_TEST_CACHE") or rootpath / ".pytest_cache" / "baton-npm")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> dict[str, str]:
    require("node", "bwrap", "npm-registry")  # module-scoped: checked before the marks of the first test
    return baton_environ(
        tmp_path_factory.mktemp("playwright") / "home",
        BATON_ARTIFACT_CACHE=str(cache_dir(pytestconfig.rootpath)),
    )


def baton(env: dict[str, str], *args: str) -> Any:
    completed = run_gateway(env, *args, "--json")
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.fixture(scope="module")
def replays(env: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Lock, verify, a first replay that pins the draft, and a second one against the pins."""
    arguments = [item for argument in ARGUMENTS for item in ("--argument", argument)]
    locked = baton(env, "lock", f"npm:{PACKAGE}@{VERSION}", *arguments)
    assert locked["adapter_id"] == "playwright-mcp"
    baton(env, "verify", "playwright-mcp")
    baton(env, "check", "playwright-mcp")
    first = baton(env, "replay", "playwright-mcp", "--apply", "--record-contract")
    second = baton(env, "replay", "playwright-mcp", "--apply")
    return first, second


def test_lock_pins_exact_playwright_and_playwright_core(env: dict[str, str], replays: Any) -> None:
    policy, _ = load_policy(Path(env["BATON_HOME"]) / "adapters" / "playwright-mcp.toml")
    names = {a.name: a.version for a in policy.artifacts}
    assert set(names) == {PACKAGE, "playwright", "playwright-core"}
    assert names[PACKAGE] == VERSION and names["playwright"] == names["playwright-core"]
    assert policy.runtime.entrypoint == ["node", "node_modules/@playwright/mcp/cli.js"]


def test_initialize_and_tools_list_succeed_and_the_pins_match_on_a_second_replay(replays: Any) -> None:
    first, second = replays
    observed = first["protocol_observation"]
    assert observed["server_name"] == "Playwright"
    assert observed["tool_count"] >= 20
    assert observed["shutdown_mode"] == "stdin_eof_clean_exit"
    for key in (
        "tool_count",
        "tool_name_set_sha256",
        "tool_schema_manifest_sha256",
        "tool_definition_sha256",
    ):
        assert second["protocol_observation"][key] == observed[key]
    assert second["client"]["declared_capabilities"] == {}


def test_list_shows_the_adapter_replayed_with_its_contract_pinned(env: dict[str, str], replays: Any) -> None:
    rows = baton(env, "list", "--json")
    assert [(r["adapter_id"], r["state"], r["contract_pinned"]) for r in rows] == [
        ("playwright-mcp", "replayed", True)
    ]


def test_a_probe_in_the_playwright_sandbox_has_no_network_and_a_read_only_root(
    env: dict[str, str], replays: Any
) -> None:
    runtime = Runtime.open(load_settings(env))
    try:
        policy, _ = load_policy(Path(env["BATON_HOME"]) / "adapters" / "playwright-mcp.toml")
        root = Path(tempfile.mkdtemp(prefix="baton-probe-"))
        materialize(policy, state.adapter_dir(runtime, policy.id) / "bundle", root)
        spec = sandbox_spec(policy, root)
        spec = type(spec)(**{**spec.__dict__, "argv": ["node", "-e", NODE_PROBE]})
        with tempfile.TemporaryFile() as stderr:
            sandbox = BubblewrapSandbox()
            process = sandbox.start(spec, stderr=stderr)
            out, _ = process.communicate(timeout=300)
            assert sandbox.cleanup(process)
    finally:
        runtime.close()
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root)
    probe = json.loads(out)
    assert (probe["uid"], probe["gid"], probe["capEff"]) == (65534, 65534, "0000000000000000")
    assert probe["interfaces"] == ["lo"]
    assert probe["connect"] in {"ENETUNREACH", "EHOSTUNREACH", "ECONNREFUSED", "timeout"}
    assert probe["writeRoot"] == "EROFS" and probe["writeWork"] == "EROFS"
