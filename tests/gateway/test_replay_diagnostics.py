"""A failed replay says what went wrong in the server's own words: the offending stdout line, how the
process really ended, and the error line of a long stack; a banner before the first message is tolerated."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from baton.testing.mcp_stdio_server import BANNER, package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway

from .conftest import TEST_SERVER

pytestmark = [pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

ENTRY = f"python3 node_modules/{TEST_SERVER}/server.py"
#: What node prints when a module is missing: the error above a stack longer than the 12 lines shown.
NODE_CRASH = """
const stack = Array.from({length: 20}, (_, i) => `    at Module._compile (node:internal/modules/cjs/loader:${i}:14)`);
console.error(["node:internal/modules/cjs/loader:1228", "  throw err;", "  ^", "",
  "Error: Cannot find module '/work/node_modules/crashy/dist/missing.js'", "Require stack:",
  "- /work/node_modules/crashy/cli.js", ...stack, "", "Node.js v20.20.2"].join("\\n"));
process.exit(1);
"""


@pytest.fixture
def env(registry: NpmRegistryServer, baton_env: dict[str, str]) -> dict[str, str]:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
    return {**baton_env, "BATON_NPM_REGISTRY": registry.url}


def locked(env: dict[str, str], mode: str, *more: str) -> None:
    done = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "demo", "--entrypoint", ENTRY,
                       "--env", f"BATON_TEST_MCP_MODE={mode}", *more)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert run_gateway(env, "verify", "demo").returncode == 0


def receipt_of(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    found = re.search(r"receipt: (\S+)", result.stderr)
    assert found is not None, result.stderr
    return dict(json.loads(Path(found.group(1)).read_text()))


def test_a_banner_before_the_first_message_is_tolerated_and_recorded(env: dict[str, str]) -> None:
    # an older MCP version too, as @agent-infra/mcp-server-filesystem: the first replay starts it twice
    locked(env, "banner", "--env", "BATON_TEST_MCP_PROTOCOL=2025-06-18")
    done = run_gateway(env, "replay", "demo", "--apply", "--record-contract", "--json")
    assert done.returncode == 0, done.stderr
    observation = json.loads(done.stdout)["protocol_observation"]
    assert observation["stdout_noise"] == [BANNER]


def test_a_non_json_line_after_the_first_message_is_shown_with_baton_s_own_kill(env: dict[str, str]) -> None:
    locked(env, "non_json")
    done = run_gateway(env, "replay", "demo", "--apply", "--record-contract")
    assert done.returncode == 1 and done.stderr.startswith("mcp_protocol_response_invalid:"), done.stderr
    assert "the line on stdout: this is not json" in done.stderr
    assert "killed by baton (SIGTERM) after the server wrote a non-JSON line to stdout" in done.stderr
    assert "exit status: -15" not in done.stderr
    assert receipt_of(done)["stdout_line"] == "this is not json"


@pytest.mark.needs("node")
def test_the_error_line_of_a_long_node_stack_is_shown_beside_the_tail(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    manifest = {"name": "crashy", "version": "1.0.0", "bin": {"crashy": "cli.js"}}
    files = {"package/package.json": json.dumps(manifest), "package/cli.js": NODE_CRASH}
    registry.publish("crashy", "1.0.0", build_tarball(files), bin={"crashy": "cli.js"})
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}
    assert run_gateway(env, "lock", "npm:crashy").returncode == 0
    assert run_gateway(env, "verify", "crashy").returncode == 0
    done = run_gateway(env, "replay", "crashy", "--apply", "--record-contract")
    assert done.returncode == 1, done.stderr
    assert (
        "the server's error: Error: Cannot find module '/work/node_modules/crashy/dist/missing.js'"
        in done.stderr
    )
    assert "exit status: 1" in done.stderr
    assert receipt_of(done)["stderr_headline"] == (
        "Error: Cannot find module '/work/node_modules/crashy/dist/missing.js'"
    )


@pytest.mark.anyio
async def test_a_server_with_a_banner_is_served_through_baton_serve(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    """What the replay tolerates works at run time too: the proxy's session skips the banner line."""
    from baton.config import load_settings
    from baton.runtime import Runtime
    from baton.testing.gateway_adapter import document, make_live, publish, tool
    from tests.conftest import call, stdio_session

    runtime = Runtime.open(load_settings({**baton_env, "BATON_NPM_REGISTRY": registry.url}))
    try:
        draft = document(
            "banner", publish(registry), [tool("echo", text="string")], env={"BATON_TEST_MCP_MODE": "banner"}
        )
        make_live(runtime, draft, allowed=["echo"])
    finally:
        runtime.close()
    async with stdio_session({**baton_env, "BATON_NPM_REGISTRY": registry.url}) as session:
        echoed = await call(session, "banner__echo", {"text": "through the banner"})
    assert echoed["success"] is True and "through the banner" in echoed["text"]
