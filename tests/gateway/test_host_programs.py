"""Host programs a server spawns: declared, pinned by replay, checked at every upstream start like the interpreter.

The test server's ``spawn`` tool runs a command line, as a server driving git does. It spawns
``/usr/bin/env`` (the host's /usr) and ``/opt/tools/probe``: a copy of ``env`` in a test-controlled host
directory mounted read-only, which the test swaps for other bytes to prove the pin refuses them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.policy.policy_files import load_policy
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_gateway
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

ENV = "/usr/bin/env"
TOOLS = [tool("spawn"), tool("crash")]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tools_dir() -> Iterator[Path]:
    """A host directory the sandbox sees read-only at /opt/tools, holding ``probe`` (a copy of env)."""
    base = Path(tempfile.mkdtemp(prefix="baton-hostprog-"))
    base.chmod(0o755)
    shutil.copy2(ENV, base / "probe")
    (base / "probe").chmod(0o755)
    yield base
    shutil.rmtree(base)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, tools_dir: Path) -> Iterator[dict[str, str]]:
    """A store where ``hp`` is live, declaring /usr/bin/env and the mounted probe as its host programs."""
    home = tmp_path_factory.mktemp("hostprog") / "home"
    environment = baton_environ(home)
    with NpmRegistryServer() as registry:
        with registry_runtime(home, registry) as runtime:
            draft = document(
                "hp",
                publish(registry),
                TOOLS,
                host_programs=[ENV, str(tools_dir / "probe")],
                mounts=[{"host": str(tools_dir), "sandbox": "/opt/tools", "mode": "ro"}],
            )
            make_live(
                runtime, draft, allowed=["spawn", "crash"], allow_destructive_without_approval=["crash"]
            )
        environment["BATON_NPM_REGISTRY"] = registry.url
        yield environment


def receipts_of(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind=kind)]
    finally:
        runtime.close()


@pytest.mark.anyio
async def test_replay_pins_the_declared_programs_and_a_swapped_one_refuses_the_next_start(
    env: dict[str, str], tools_dir: Path
) -> None:
    probe = tools_dir / "probe"
    policy, _ = load_policy(Path(env["BATON_HOME"]) / "adapters" / "hp.toml")
    assert [(p.path, p.real_path, p.sha256) for p in policy.host_programs] == [
        (ENV, str(Path(ENV).resolve()), sha256_of(Path(ENV))),
        (str(probe), str(probe.resolve()), sha256_of(probe)),
    ]
    (promoted,) = receipts_of(env, "gateway_promote")
    assert promoted["host_programs"] == [p.model_dump() for p in policy.host_programs]
    assert receipts_of(env, "gateway_replay")[-1]["host_programs"] == promoted["host_programs"]

    async with stdio_session(env) as session:
        from_usr = await call(session, "hp__spawn", {"argv": [ENV, "echo", "from-usr"]})
        assert (from_usr["success"], from_usr["text"]) == (True, "from-usr\n")
        from_mount = await call(session, "hp__spawn", {"argv": ["/opt/tools/probe", "echo", "from-mount"]})
        assert (from_mount["success"], from_mount["text"]) == (True, "from-mount\n")

        swapped = tools_dir / "probe.new"  # other bytes at the pinned path, swapped in atomically
        shutil.copy2("/usr/bin/printenv", swapped)
        swapped.chmod(0o755)
        os.replace(swapped, probe)
        assert sha256_of(probe) != policy.host_programs[1].sha256

        crashed = await call(session, "hp__crash")  # the upstream dies; the next call starts it again
        assert crashed["error_class"] == "mcp_upstream_failed"
        refused = await call(session, "hp__spawn", {"argv": ["/opt/tools/probe", "echo", "never"]})
        assert refused["error_class"] == "adapter_runtime_drift"
        assert str(probe) in refused["error"] and "sha256" in refused["error"]
        again = await call(session, "hp__spawn", {"argv": [ENV, "echo", "x"]})  # blocked, not retried
        assert again["error_class"] == "adapter_runtime_drift"
        listed = await call(session, "mcp_list_adapters")
        (live,) = [a for a in listed["adapters"] if a["adapter_id"] == "hp"]
        assert live["blocked"] is True and live["block_error_class"] == "adapter_runtime_drift"

    (failure,) = [r for r in receipts_of(env, "gateway_failure") if r.get("stage") == "runtime"]
    assert failure["error_class"] == "adapter_runtime_drift" and str(probe) in failure["error"]
    calls = [r for r in receipts_of(env, "gateway_call") if r["tool"] == "spawn"]
    assert [r["error_class"] for r in calls] == [None, None, "adapter_runtime_drift", "adapter_runtime_drift"]

    checked = run_gateway(env, "check", "hp")
    assert checked.returncode != 0 and checked.stderr.startswith("adapter_runtime_drift:")
    replayed = run_gateway(env, "replay", "hp", "--apply")
    assert replayed.returncode != 0 and replayed.stderr.startswith("adapter_runtime_drift:")
    assert str(probe) in replayed.stderr


def test_a_declared_program_must_be_an_absolute_path_the_sandbox_sees(
    env: dict[str, str], tmp_path: Path
) -> None:
    candidate = "npm:baton-test-mcp"
    relative = run_gateway(env, "lock", candidate, "--id", "rel", "--host-program", "usr/bin/git")
    assert relative.returncode != 0 and relative.stderr.startswith("adapter_policy_invalid:")
    outside = tmp_path / "tool"
    shutil.copy2(ENV, outside)
    locked = run_gateway(
        env,
        "lock",
        candidate,
        "--id",
        "outside",
        "--entrypoint",
        "python3 node_modules/baton-test-mcp/server.py",
        "--host-program",
        str(outside),
        "--host-program",
        ENV,
    )
    assert locked.returncode == 0, locked.stderr
    policy, _ = load_policy(Path(env["BATON_HOME"]) / "adapters" / "outside.toml")
    assert policy.runtime.host_programs == [str(outside), ENV] and policy.host_programs == []
    assert run_gateway(env, "verify", "outside").returncode == 0
    assert run_gateway(env, "check", "outside").returncode == 0  # nothing pinned yet: replay pins
    refused = run_gateway(env, "replay", "outside", "--apply", "--record-contract")
    assert refused.returncode != 0 and refused.stderr.startswith("adapter_policy_invalid:")
    assert "outside what the sandbox sees" in refused.stderr
    assert load_policy(Path(env["BATON_HOME"]) / "adapters" / "outside.toml")[0].host_programs == []
