"""``baton gateway export ID --format replay-controller DIR`` checked by the unchanged reference controller.

The controller pins its own candidate (``@playwright/mcp@0.0.78`` with ``playwright`` and
``playwright-core`` at ``1.62.0-alpha-1783623505000``, its entrypoint, arguments and allowed tools), so the
offline npm registry the gateway tests use publishes packages of those names: a small Node MCP server
as ``@playwright/mcp``'s ``cli.js`` and its two dependencies. baton locks, verifies and replays it in
bubblewrap like any npm adapter (real CLI processes); the export's four files then pass the
controller's ``check``, and a changed byte makes it fail with its own error class.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway
from tests.conftest import baton_environ

pytestmark = [pytest.mark.needs("node", "bwrap"), pytest.mark.timeout(1800)]

CONTROLLER = Path(__file__).resolve().parent / "replay_controller.py"
ALPHA = "1.62.0-alpha-1783623505000"
ARGUMENTS = [
    "--headless",
    "--isolated",
    "--allowed-origins",
    "https://awoooi.wooo.work",
    "--output-dir",
    "/tmp/mcp-output",
    "--executable-path",
    "/nonexistent/browser",
]
ALLOWED = ["browser_close", "browser_navigate", "browser_snapshot", "browser_take_screenshot"]
DENIED = ["browser_file_upload", "browser_run_code_unsafe"]
#: A Node MCP server that answers initialize and tools/list (what the controller's replay asks of it).
CLI_JS = """#!/usr/bin/env node
const readline = require("readline");
const tool = (name, readOnly) => ({name, description: `The test tool ${name}.`,
  inputSchema: {type: "object", properties: {}}, annotations: {readOnlyHint: readOnly}});
const tools = [TOOLS].map(([name, readOnly]) => tool(name, readOnly));
const send = (message) => process.stdout.write(JSON.stringify(message) + "\\n");
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id === undefined) return;
  if (message.method === "initialize") {
    send({jsonrpc: "2.0", id: message.id, result: {protocolVersion: message.params.protocolVersion,
      capabilities: {tools: {}}, serverInfo: {name: "Playwright", version: "0.0.78"}}});
  } else if (message.method === "tools/list") {
    send({jsonrpc: "2.0", id: message.id, result: {tools}});
  } else {
    send({jsonrpc: "2.0", id: message.id, error: {code: -32601, message: "not supported"}});
  }
}).on("close", () => process.exit(0));
""".replace("TOOLS", ", ".join([*(f'["{n}", true]' for n in ALLOWED), *(f'["{n}", false]' for n in DENIED)]))


def package(name: str, version: str, extra: dict[str, str], **manifest: Any) -> bytes:
    """An npm tarball of ``name@version`` with ``extra`` files beside its package.json."""
    files: dict[str, bytes | str] = {
        "package/package.json": json.dumps({"name": name, "version": version, "license": "MIT", **manifest}),
        **{f"package/{path}": text for path, text in extra.items()},
    }
    return build_tarball(files)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A home and the offline registry with the three packages the controller pins."""
    environment = baton_environ(tmp_path_factory.mktemp("export") / "home")
    with NpmRegistryServer() as registry:
        core = package("playwright-core", ALPHA, {"index.js": "module.exports = {};\n"})
        registry.publish("playwright-core", ALPHA, core)
        deps = {"playwright-core": ALPHA}
        browser = package("playwright", ALPHA, {"index.js": "module.exports = {};\n"}, dependencies=deps)
        registry.publish("playwright", ALPHA, browser, dependencies=deps)
        bins = {"mcp-server-playwright": "cli.js"}
        mcp = package(
            "@playwright/mcp", "0.0.78", {"cli.js": CLI_JS}, dependencies={"playwright": ALPHA}, bin=bins
        )
        registry.publish("@playwright/mcp", "0.0.78", mcp, dependencies={"playwright": ALPHA}, bin=bins)
        environment["BATON_NPM_REGISTRY"] = registry.url
        yield environment


def docker_answers() -> bool:
    """Whether a Docker engine answers (not only whether the CLI is installed)."""
    if shutil.which("docker") is None:
        return False
    try:
        return (
            subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False).returncode == 0
        )
    except subprocess.TimeoutExpired:
        return False


def baton(env: dict[str, str], *args: str) -> Any:
    done = run_gateway(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def controller(
    exported: dict[str, Any], files: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The unchanged controller's ``check`` on the exported files (or on ``files``)."""
    paths = files or exported["files"]
    run_id = str(uuid.uuid4())
    command = [
        sys.executable,
        str(CONTROLLER),
        *("--policy", paths["policy"], "--artifact-policy", paths["artifact_policy"]),
        *("--artifact-controller-receipt", paths["controller_receipt"]),
        *("--artifact-verifier-receipt", paths["verifier_receipt"]),
        *("--run-id", run_id, "--trace-id", f"mcp-replay-{run_id}", "check"),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def exported(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Lock, verify, replay (pinning the contract), allow the four tools, replay again, export."""
    arguments = [item for argument in ARGUMENTS for item in ("--argument", argument)]
    locked = baton(env, "lock", "npm:@playwright/mcp@0.0.78", *arguments)
    adapter = locked["adapter_id"]
    baton(env, "verify", adapter)
    baton(env, "replay", adapter, "--apply", "--record-contract")
    baton(env, "allow", adapter, *ALLOWED)
    baton(env, "replay", adapter, "--apply")
    directory = tmp_path_factory.mktemp("controller-inputs")
    return dict(baton(env, "export", adapter, "--format", "replay-controller", str(directory)))


def test_the_reference_controller_checks_baton_s_export(exported: dict[str, Any]) -> None:
    done = controller(exported)
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["status"] == "completed_check_mode_no_runtime_execution"
    assert receipt["stage_receipts"]["check_mode"]["artifact_receipt_chain_verified"] is True
    for key, path in exported["files"].items():
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == exported["sha256"][key]


def flipped(exported: dict[str, Any], key: str, at: int, directory: Path) -> dict[str, str]:
    """A copy of the exported files with one bit of byte ``at`` of ``key``'s file flipped."""
    files = {}
    for name, path in exported["files"].items():
        target = directory / Path(path).name
        shutil.copyfile(path, target)
        files[name] = str(target)
    data = bytearray(Path(files[key]).read_bytes())
    data[at % len(data)] ^= 0x01
    Path(files[key]).write_bytes(bytes(data))
    return files


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The controller's own error class from its stderr (it prints one JSON object and no traceback)."""
    assert not done.stdout.strip(), done.stdout
    answer = json.loads(done.stderr.strip().splitlines()[-1])
    assert answer["status"] == "blocked_with_safe_next_action"
    return str(answer["error_class"])


@pytest.mark.parametrize("key", ["artifact_policy", "controller_receipt", "verifier_receipt"])
def test_any_changed_byte_of_the_evidence_fails_the_controller_s_check(
    exported: dict[str, Any], key: str, tmp_path: Path
) -> None:
    size = Path(exported["files"][key]).stat().st_size
    for index, at in enumerate([0, 1, size // 3, size // 2, size - 2, size - 1]):
        directory = tmp_path / str(index)
        directory.mkdir()
        assert refusal(controller(exported, flipped(exported, key, at, directory)))


def test_a_changed_hash_or_contract_byte_of_the_replay_policy_fails_the_check(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    """The controller binds the replay policy's hashes, pins and identities (not its prose fields)."""
    text = Path(exported["files"]["policy"]).read_text(encoding="utf-8")
    policy = json.loads(text)
    source = policy["artifact_source"]
    targets = [
        source["controller_receipt_sha256"],
        source["verifier_receipt_sha256"],
        source["policy_checksum"].removeprefix("sha256:"),
        next(iter(source["package_integrities"].values())),
        source["bundle_manifest_sha256"],
        "node_modules/@playwright/mcp/cli.js",
        "65534:65534",
    ]
    for index, target in enumerate(targets):
        directory = tmp_path / str(index)
        directory.mkdir()
        at = text.encode("utf-8").index(target.encode("utf-8")) + len(target) // 2
        assert refusal(controller(exported, flipped(exported, "policy", at, directory)))


def test_the_controller_s_replay_needs_a_docker_engine(exported: dict[str, Any]) -> None:
    """Where an engine answers, the refs of the export are names, not pushed images: the controller's
    replay stops at its own pull step, with its own class (pushing the bundle as an image is not done)."""
    if not docker_answers():
        pytest.skip(
            "the controller's replay --apply pulls and runs OCI images through a Docker engine; none answers here"
        )
    run_id = str(uuid.uuid4())
    paths = exported["files"]
    done = subprocess.run(
        [
            sys.executable,
            str(CONTROLLER),
            *("--policy", paths["policy"], "--artifact-policy", paths["artifact_policy"]),
            *("--artifact-controller-receipt", paths["controller_receipt"]),
            *("--artifact-verifier-receipt", paths["verifier_receipt"]),
            *("--run-id", run_id, "--trace-id", f"mcp-replay-{run_id}"),
            *("--receipt", str(Path(paths["policy"]).with_name("replay-receipt.json")), "replay", "--apply"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert refusal(done) == "immutable_image_pull_failed"
