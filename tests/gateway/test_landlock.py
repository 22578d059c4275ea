"""The Landlock sandbox, for hosts where bubblewrap cannot start: forced by the policy, or chosen when bwrap is gone.

The test server runs under it through a real ``baton serve``: it writes in its temporary directory (and
cannot execute what it wrote there) and nowhere else, not even into a world-writable host directory; it
reads no file of /etc beyond the loader's; it reaches no HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.sandbox.landlock import abi
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli, run_gateway
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [
    pytest.mark.skipif(
        abi() < 1, reason="the kernel offers no Landlock (Linux 5.13+ with landlock in its LSMs)"
    ),
    pytest.mark.timeout(1800),
]

TOOLS = [
    tool("echo", text="string"),
    tool("write", path="string", text="string"),
    tool("read", path="string"),
]
TOOLS += [tool("fetch", url="string"), tool("spawn", argv="array")]


@pytest.fixture(scope="module")
def outside() -> Iterator[Path]:
    """A world-writable host directory: only Landlock stands between the sandbox (uid 65534) and it."""
    base = Path(tempfile.mkdtemp(prefix="baton-landlock-"))
    base.chmod(0o777)
    yield base
    shutil.rmtree(base)


def environment(home: Path, registry: NpmRegistryServer) -> dict[str, str]:
    """The CLI's and ``baton serve``'s environment for ``home``."""
    return baton_environ(home, BATON_NPM_REGISTRY=registry.url)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A store where ``ll`` is live with ``sandbox = "landlock"``."""
    home = tmp_path_factory.mktemp("landlock") / "home"
    with NpmRegistryServer() as registry:
        with registry_runtime(home, registry) as runtime:
            draft = document("ll", publish(registry), TOOLS, sandbox="landlock")
            names = [t["name"] for t in TOOLS]
            make_live(runtime, draft, allowed=names, allow_destructive_without_approval=["write", "spawn"])
        yield environment(home, registry)


def last_replay(env: dict[str, str], adapter_id: str) -> dict[str, Any]:
    """The newest replay receipt file of an adapter (the reference controller's schema)."""
    directory = Path(env["BATON_HOME"]) / "gateway" / adapter_id / "receipts"
    newest = max(directory.glob("replay-*.json"), key=lambda p: p.stat().st_mtime_ns)
    value: dict[str, Any] = json.loads(newest.read_bytes())
    return value


@pytest.mark.anyio
async def test_the_landlock_sandbox_confines_writes_reads_and_the_network_through_baton_serve(
    env: dict[str, str], outside: Path, pages: dict[str, str]
) -> None:
    replayed = last_replay(env, "ll")
    assert replayed["sandbox"] == "landlock", replayed
    enforced = replayed["stage_receipts"]["risk_policy"]["enforced"]
    assert enforced["landlock_abi"] >= 1 and enforced["socket_families"] == "AF_UNIX only"
    assert any("PID namespace" in item for item in enforced["not_isolated"])

    async with stdio_session(env) as session:
        assert (await call(session, "ll__echo", {"text": "hi"}))["text"] == "hi"
        home = ["/bin/sh", "-c", 'echo ok > "$HOME/in.txt" && cat "$HOME/in.txt"']
        assert (await call(session, "ll__spawn", {"argv": home}))["text"] == "ok\n"
        noexec = ["/bin/sh", "-c", 'cp /bin/true "$HOME/t" && "$HOME/t" 2>&1; echo "status $?"']
        assert "Permission denied" in (await call(session, "ll__spawn", {"argv": noexec}))["text"]
        escaped = outside / "out.txt"
        refused = await call(session, "ll__write", {"path": str(escaped), "text": "no"})
        assert refused["success"] is False and "PermissionError" in refused["error"], refused
        assert not escaped.exists()
        secret = await call(session, "ll__read", {"path": "/etc/hostname"})
        assert secret["success"] is False and "PermissionError" in secret["error"], secret
        fetched = await call(session, "ll__fetch", {"url": pages["allowed"]})
        assert fetched["text"].startswith("error") and "Permission denied" in fetched["text"], fetched


def test_without_bubblewrap_doctor_names_landlock_and_a_default_policy_replays_under_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    """bwrap off the PATH, as on a host that lacks it: doctor says which sandbox and why; replay uses it."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for program in ("unshare", "prlimit", "npm", "node"):
        found = shutil.which(program)
        if found:
            (bare / program).symlink_to(found)
    without = {**env, "PATH": f"{bare}:{Path(sys.executable).parent}"}
    doctor = run_cli(without, "doctor", "--json")
    (line,) = [c for c in json.loads(doctor.stdout) if c["name"] == "sandbox"]
    assert line["ok"] is True and line["detail"].startswith("landlock, because bubblewrap"), line
    assert "bwrap" in line["detail"] and "Not isolated" in line["detail"]

    entry = "python3 node_modules/baton-test-mcp/server.py"
    locked = run_gateway(without, "lock", "npm:baton-test-mcp", "--id", "plain", "--entrypoint", entry)
    assert locked.returncode == 0, locked.stderr
    for step in (["verify", "plain"], ["replay", "plain", "--apply", "--record-contract"]):
        done = run_gateway(without, *step)
        assert done.returncode == 0, (step, done.stdout + done.stderr)
    assert last_replay(env, "plain")["sandbox"] == "landlock"


@pytest.mark.needs("node")
def test_node_starts_under_landlock(tmp_path: Path) -> None:
    """node reads /etc/ssl/openssl.cnf before anything else, and exits 13 where it may not."""
    import subprocess

    from baton.gateway.sandbox import scratch
    from baton.gateway.sandbox.landlock import LandlockSandbox
    from baton.gateway.sandbox.sandbox_spec import SandboxSpec

    tree = scratch.make("replay")
    tree.chmod(0o755)
    try:
        sandbox = LandlockSandbox()
        argv = ["node", "-e", "console.log(require('crypto').createHash('sha256').update('x').digest('hex'))"]
        process = sandbox.start(SandboxSpec(workdir=tree, argv=argv), stderr=subprocess.PIPE)
        out, err = process.communicate(timeout=60)
        sandbox.cleanup(process)
    finally:
        scratch.remove(tree)
    assert process.returncode == 0, err
    assert out.decode().strip() == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"


def test_a_wheel_server_runs_under_landlock(tmp_path: Path) -> None:
    """No /work without a mount namespace: baton's boot finds the bundle's site-packages beside itself."""
    from baton.gateway.lock import artifacts, stages
    from baton.gateway.policy.policy_files import load_policy, write_policy
    from baton.gateway.replay.replay import replay
    from baton.testing import mcp_stdio_server
    from baton.testing.npm_registry import build_python_wheel

    server = Path(mcp_stdio_server.__file__).read_text(encoding="utf-8")
    modules = {"ll_probe/__init__.py": "", "ll_probe/__main__.py": server}
    with NpmRegistryServer() as registry:
        filename, wheel = build_python_wheel("ll-probe", "1.0.0", modules)
        registry.publish_wheel("ll-probe", "1.0.0", filename, wheel)
        urls = {"BATON_PYPI_URL": registry.url, "BATON_NPM_REGISTRY": registry.url}
        runtime = Runtime.open(load_settings({"BATON_HOME": str(tmp_path / "home"), **urls}))
        try:
            path = Path(artifacts.lock(runtime, "pypi:ll-probe", adapter_id="llpy")["policy_path"])
            policy, _ = load_policy(path)
            forced = policy.runtime.model_copy(update={"sandbox": "landlock"})
            write_policy(path, policy.model_copy(update={"runtime": forced}))
            artifacts.lock(runtime, "llpy")
            stages.verify(runtime, "llpy")
            observed = replay(runtime, "llpy", apply=True, record=True)
        finally:
            runtime.close()
    assert observed["receipt"]["sandbox"] == "landlock"
    assert observed["protocol_observation"]["server_name"] == "baton-test-mcp"
