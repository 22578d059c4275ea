"""Every refusal's advice works when followed: the test runs exactly the ``next:`` command each refusal
prints (host-program drift, contract drift, install script, entrypoint, wheel cap, node runtime, mcp 1.x)
and sees it get further.

Each case drives the real CLI in its own process, as an operator does; a ``next:`` line is split like a
shell would and run as written (only ``baton`` becomes ``python -m baton``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_python_wheel, build_tarball
from tests.cli_process import run_cli, run_gateway

from .conftest import TEST_SERVER

pytestmark = pytest.mark.timeout(1800)

ENTRY = f"python3 node_modules/{TEST_SERVER}/server.py"
Done = subprocess.CompletedProcess[str]


def next_step(result: Done) -> list[str]:
    """The last ``next:`` line of a command's output (stdout on success, stderr on a refusal), as argv."""
    text = result.stdout if result.returncode == 0 else result.stderr
    lines = [line for line in text.splitlines() if line.startswith("next: ")]
    assert lines, f"no next: line in {text!r}"
    words = shlex.split(lines[-1].removeprefix("next: "))
    assert words[:2] == ["baton", "gateway"], words
    return words


def follow(env: dict[str, str], result: Done) -> Done:
    """Run exactly the command ``result`` advises."""
    return run_cli(env, *next_step(result)[1:])


def refused(result: Done, error_class: str) -> Done:
    assert result.returncode == 1, result.stdout
    assert result.stderr.startswith(error_class + ":"), result.stderr
    return result


def ok(result: Done) -> Done:
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def env(registry: NpmRegistryServer, baton_env: dict[str, str]) -> dict[str, str]:
    return {**baton_env, "BATON_NPM_REGISTRY": registry.url, "BATON_PYPI_URL": registry.url}


@pytest.fixture
def tools_dir() -> Iterator[Path]:
    """A host directory the sandbox can enter (pytest's tmp_path is 0700), holding ``probe``."""
    base = Path(tempfile.mkdtemp(prefix="baton-advice-"))
    base.chmod(0o755)
    shutil.copy2("/usr/bin/env", base / "probe")
    (base / "probe").chmod(0o755)
    yield base
    shutil.rmtree(base)


def publish(registry: NpmRegistryServer) -> None:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})


def publish_native(registry: NpmRegistryServer) -> None:
    """``native`` 1.0.0, a package with a ``postinstall`` script (refused unless allowed by name)."""
    scripts = {"postinstall": "node build.js"}
    manifest = {"name": "native", "version": "1.0.0", "scripts": scripts}
    native = build_tarball({"package/package.json": json.dumps(manifest), "package/index.js": ""})
    registry.publish("native", "1.0.0", native, scripts=scripts, hasInstallScript=True)


def publish_server_wheel(registry: NpmRegistryServer, name: str, module: str) -> None:
    """A wheel ``name`` 1.0.0 needing ``mcp``, whose console script runs ``main`` of the source ``module``."""
    package = name.replace("-", "_")
    filename, wheel = build_python_wheel(
        name, "1.0.0", {f"{package}/__init__.py": module}, requires=["mcp"],
        console_scripts={name: f"{package}:main"},
    )  # fmt: skip
    registry.publish_wheel(name, "1.0.0", filename, wheel)


def publish_mcp(registry: NpmRegistryServer, versions: dict[str, dict[str, str]]) -> None:
    """An ``mcp`` wheel for each version: the ``mcp`` and ``mcp.server`` packages and the modules given."""
    for version, modules in versions.items():
        files = {"mcp/__init__.py": "", "mcp/server/__init__.py": "", **modules}
        filename, wheel = build_python_wheel("mcp", version, files)
        registry.publish_wheel("mcp", version, filename, wheel)


def refused_at_replay(env: dict[str, str], adapter: str) -> Done:
    """Lock and verify ``pypi:adapter``, then the replay that is refused as an invalid protocol response."""
    ok(run_gateway(env, "lock", f"pypi:{adapter}"))
    ok(run_gateway(env, "verify", adapter))
    replay = [sys.executable, "-m", "baton", "gateway", "replay", adapter, "--apply", "--record-contract"]
    # not run_gateway: the server's own Traceback is in the stderr tail shown, on purpose
    failed = subprocess.run(replay, env=env, capture_output=True, text=True, timeout=600, check=False)
    return refused(failed, "mcp_protocol_response_invalid")


@pytest.mark.needs("bwrap")
def test_host_program_drift_advice_locks_again_and_the_chain_then_replays(
    registry: NpmRegistryServer, env: dict[str, str], tools_dir: Path
) -> None:
    publish(registry)
    probe = str(tools_dir / "probe")
    mount = f"{tools_dir}:/opt/tools"
    ok(run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "hp", "--entrypoint", ENTRY, "--mount", mount,
                   "--host-program", probe))  # fmt: skip
    ok(run_gateway(env, "verify", "hp"))
    ok(run_gateway(env, "replay", "hp", "--apply", "--record-contract"))
    swapped = tools_dir / "probe.new"
    shutil.copy2("/usr/bin/printenv", swapped)
    swapped.chmod(0o755)
    os.replace(swapped, tools_dir / "probe")

    drift = refused(run_gateway(env, "check", "hp"), "adapter_runtime_drift")
    assert next_step(drift) == ["baton", "gateway", "lock", "hp"]
    locked = ok(follow(env, drift))
    verified = ok(follow(env, locked))
    replayed = ok(follow(env, verified))
    assert next_step(verified)[3:] == ["hp", "--apply"], "the contract stays pinned"
    assert "replayed hp" in replayed.stdout


@pytest.mark.needs("bwrap")
def test_contract_drift_advice_drafts_the_version_again_and_the_chain_re_pins_it(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    publish(registry)
    one = [{"name": "first", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
    two = [*one, {"name": "second", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
    ok(run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "demo", "--entrypoint", ENTRY,
                   "--env", "BATON_TEST_MCP_TOOLS=env:HOST_TOOLS"))  # fmt: skip
    ok(run_gateway(env, "verify", "demo"))
    ok(run_gateway({**env, "HOST_TOOLS": json.dumps(one)}, "replay", "demo", "--apply", "--record-contract"))
    ok(run_gateway(env, "allow", "demo", "first"))

    later = {**env, "HOST_TOOLS": json.dumps(two)}
    drift = refused(run_gateway(later, "replay", "demo", "--apply"), "mcp_tool_contract_mismatch")
    assert next_step(drift) == [
        "baton",
        "gateway",
        "lock",
        f"npm:{TEST_SERVER}@1.0.0",
        "--id",
        "demo",
        "--replace",
    ]
    drafted = ok(follow(later, drift))
    verified = ok(follow(later, drafted))
    assert next_step(verified)[-1] == "--record-contract"
    replayed = ok(follow(later, verified))
    assert "2 tool(s)" in replayed.stdout and "allowed: first" in replayed.stdout
    assert next_step(replayed)[:4] == ["baton", "gateway", "promote", "demo"]


@pytest.mark.needs("node")
def test_install_script_advice_adds_the_one_flag_and_lock_then_passes(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    publish_native(registry)
    app = build_tarball({"package/package.json": '{"name":"app","version":"1.0.0"}', "package/index.js": ""})
    registry.publish("app", "1.0.0", app, dependencies={"native": "1"})

    refusal = refused(run_gateway(env, "lock", "npm:app", "--id", "app"), "artifact_install_script_refused")
    assert next_step(refusal) == [
        "baton", "gateway", "lock", "npm:app", "--id", "app", "--allow-without-install-scripts", "native"
    ]  # fmt: skip
    locked = ok(follow(env, refusal))
    assert next_step(locked) == ["baton", "gateway", "verify", "app"]


@pytest.mark.needs("node")
def test_node_advice_bundles_the_runtime_and_later_advice_keeps_the_flag(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    """Like @bytebase/dbhub: engines.node >= 22.5 and a dependency with an install script."""
    from .test_node_runtime import serve_recorded_runtime

    publish_native(registry)
    registry.publish(
        TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"},
        dependencies={"native": "1"}, engines={"node": ">=22.5.0"},
    )  # fmt: skip
    serve_recorded_runtime(registry)

    refusal = refused(run_gateway(env, "lock", f"npm:{TEST_SERVER}"), "adapter_runtime_unavailable")
    assert next_step(refusal) == ["baton", "gateway", "lock", f"npm:{TEST_SERVER}", "--node", "22"]
    scripted = refused(follow(env, refusal), "artifact_install_script_refused")
    assert next_step(scripted)[4:] == ["--allow-without-install-scripts", "native", "--node", "22"]
    locked = ok(follow(env, scripted))
    assert "runs on node 22.23.5 from the registry" in locked.stdout


def test_an_entrypoint_the_package_does_not_ship_is_refused_at_lock_with_the_ones_it_does(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    publish(registry)
    wrong = f"python3 node_modules/{TEST_SERVER}/nope.py"
    refusal = refused(
        run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "e", "--entrypoint", wrong),
        "artifact_no_entrypoint",
    )
    assert f"'{ENTRY}'" in refusal.stderr, "the message lists what the package ships"
    assert next_step(refusal) == [
        "baton",
        "gateway",
        "lock",
        f"npm:{TEST_SERVER}",
        "--id",
        "e",
        "--entrypoint",
        ENTRY,
    ]
    locked = ok(follow(env, refusal))
    assert next_step(locked) == ["baton", "gateway", "verify", "e"]
    ok(follow(env, locked))
    # drafting over an existing policy: the advice drafts it as its next version
    exists = refused(run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "e"), "adapter_policy_exists")
    assert next_step(exists) == ["baton", "gateway", "lock", f"npm:{TEST_SERVER}", "--id", "e", "--replace"]
    assert next_step(ok(follow(env, exists))) == ["baton", "gateway", "verify", "e"]
    # an existing policy locked again with a wrong --entrypoint is refused the same way, nothing written
    again = refused(run_gateway(env, "lock", "e", "--entrypoint", wrong), "artifact_no_entrypoint")
    assert next_step(again) == ["baton", "gateway", "lock", "e", "--entrypoint", ENTRY]
    ok(follow(env, again))


def test_a_wheel_over_the_cap_is_refused_at_lock_naming_the_flag_that_admits_it(
    registry: NpmRegistryServer, env: dict[str, str], baton_env: dict[str, str]
) -> None:
    modules = {"big_server/__init__.py": "def main():\n    pass\n", "big_server/blob.py": "#" * (2 << 20)}
    filename, wheel = build_python_wheel(
        "big-server", "1.0.0", modules, console_scripts={"big-server": "big_server:main"}
    )
    registry.publish_wheel("big-server", "1.0.0", filename, wheel)
    refusal = refused(
        run_gateway(env, "lock", "pypi:big-server", "--max-wheel-mb", "1"), "artifact_archive_limits_exceeded"
    )
    assert "--max-wheel-mb 3" in refusal.stderr
    assert next_step(refusal) == ["baton", "gateway", "lock", "pypi:big-server", "--max-wheel-mb", "3"]
    locked = ok(follow(env, refusal))
    assert next_step(locked) == ["baton", "gateway", "verify", "big-server"]
    policy = (Path(baton_env["BATON_HOME"]) / "adapters" / "big-server.toml").read_text()
    assert "max_wheel_mb = 3" in policy
    shown = json.loads(ok(run_gateway(env, "lock", "big-server", "--json")).stdout)
    assert shown["max_wheel_mb"] == 3, "a later lock keeps the recorded cap"


@pytest.mark.needs("bwrap")
def test_a_server_built_for_mcp_1_resolved_against_mcp_2_is_advised_to_constrain_it(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    from baton.testing import mcp_stdio_server

    server = Path(mcp_stdio_server.__file__).read_text(encoding="utf-8")
    serve = "def main():\n    from mcp.server.fastmcp import main as serve\n    serve()\n"
    publish_server_wheel(registry, "ocr-like", serve)
    publish_mcp(registry, {"1.9.0": {"mcp/server/fastmcp.py": server}, "2.0.0": {}})  # FastMCP is gone in 2.x
    refusal = refused_at_replay(env, "ocr-like")
    assert "the server's error: ModuleNotFoundError: No module named 'mcp.server.fastmcp'" in refusal.stderr
    assert next_step(refusal) == [
        "baton", "gateway", "lock", "pypi:ocr-like==1.0.0", "--id", "ocr-like", "--replace", "--constraint", "mcp<2"
    ]  # fmt: skip
    drafted = ok(follow(env, refusal))
    verified = ok(follow(env, drafted))
    replayed = ok(follow(env, verified))
    assert "replayed ocr-like" in replayed.stdout


@pytest.mark.needs("bwrap")
def test_a_server_on_the_mcp_1_low_level_decorators_is_advised_to_constrain_mcp(
    registry: NpmRegistryServer, env: dict[str, str]
) -> None:
    """cli-mcp-server's ``@server.list_tools()``: 2.x's low-level ``Server`` has no decorators."""
    from baton.testing import mcp_stdio_server

    server = Path(mcp_stdio_server.__file__).read_text(encoding="utf-8")
    decorators = "class Server:\n    def __init__(self, name):\n        pass\n"
    serve = (
        "def main():\n    from mcp.server import lowlevel\n    server = lowlevel.Server('cli-like')\n"
        "    server.list_tools()\n    lowlevel.main()\n"
    )
    publish_server_wheel(registry, "cli-like", serve)
    one = server + decorators + "    def list_tools(self):\n        return lambda fn: fn\n"
    publish_mcp(
        registry, {"1.9.0": {"mcp/server/lowlevel.py": one}, "2.0.0": {"mcp/server/lowlevel.py": decorators}}
    )
    refusal = refused_at_replay(env, "cli-like")
    assert (
        "the server's error: AttributeError: 'Server' object has no attribute 'list_tools'" in refusal.stderr
    )
    assert next_step(refusal)[-3:] == ["--replace", "--constraint", "mcp<2"]
    replayed = ok(follow(env, ok(follow(env, ok(follow(env, refusal))))))
    assert "replayed cli-like" in replayed.stdout
