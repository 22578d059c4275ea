"""Hostile servers: each attack is run for real and its result checked from inside or outside the sandbox.

Covered elsewhere, from inside the sandbox (tests/gateway/test_sandbox.py): network, a root-only
secret file, writes outside /tmp and the rw mount, exec from /tmp, every denied system call. Here: a
fork bomb (and that the limit is per sandbox), memory, CPU, a 100 MB stderr flood, a 10 MB line, a
server that never exits, no temp tree left behind by any failure, and the sandbox as an ordinary user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.errors import GatewayError
from baton.gateway.replay.replay import replay
from baton.gateway.sandbox import cgroups
from baton.gateway.sandbox.bwrap_command import prepare
from baton.gateway.sandbox.sandbox import BubblewrapSandbox
from baton.gateway.sandbox.sandbox_spec import SandboxSpec
from baton.gateway.sandbox.stderr import STDERR_CAP_BYTES
from baton.runtime import Runtime
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball

from .test_replay import edit_policy, fails_with, ready
from .test_sandbox import world_readable_dir

pytestmark = pytest.mark.needs("bwrap")

FORK_BOMB = r"""
import errno, json, os, sys, time
forked, error = 0, None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as exc:
        error = errno.errorcode[exc.errno]
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    forked += 1
print(json.dumps({"forked": forked, "error": error}), flush=True)
if os.environ.get("HOLD"):
    sys.stdin.read()
os._exit(0)
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    directory = world_readable_dir("baton-hostile-")
    yield directory
    shutil.rmtree(directory)


def start(spec: SandboxSpec, sandbox: BubblewrapSandbox) -> subprocess.Popen[bytes]:
    return sandbox.start(spec, stderr=subprocess.PIPE)


def first_line(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read().decode() if process.stderr else ""
    result: dict[str, Any] = json.loads(line)
    return result


def test_a_fork_bomb_stops_at_the_pids_limit_and_leaves_nothing_behind(workdir: Path) -> None:
    sandbox = BubblewrapSandbox()
    process = start(SandboxSpec(workdir=workdir, argv=["python3", "-c", FORK_BOMB], pids_limit=16), sandbox)
    result = first_line(process)
    process.communicate(timeout=300)
    assert result["error"] == "EAGAIN" and 0 < result["forked"] < 16
    prepared = sandbox.prepared[process.pid]
    cgroup = prepared.cgroup
    assert sandbox.cleanup(process)  # the stage is gone and, with a cgroup, every process in it
    if cgroup is not None:
        assert not cgroup.pids.exists()
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks


@pytest.mark.skipif(cgroups.pids_base() is None, reason=f"pids_limit scope here: {cgroups.scope()}")
def test_the_pids_limit_is_per_sandbox_not_per_host_uid(workdir: Path) -> None:
    """Two sandboxes of host uid 65534 at once: each reaches its own limit; neither eats the other's."""
    sandbox = BubblewrapSandbox()
    spec = SandboxSpec(workdir=workdir, argv=["python3", "-c", FORK_BOMB], pids_limit=16, env={"HOLD": "1"})
    holder = start(spec, sandbox)
    other = start(spec, sandbox)
    try:
        held, second = first_line(holder), first_line(other)
        assert held["error"] == second["error"] == "EAGAIN"
        assert held["forked"] == second["forked"] > 8
    finally:
        for process in (holder, other):
            process.communicate(timeout=300)
            assert sandbox.cleanup(process)


def test_memory_beyond_the_limit_is_refused_inside(workdir: Path) -> None:
    probe = "try:\n    b = bytearray(512 << 20)\n    print('allocated')\nexcept MemoryError:\n    print('MemoryError')"
    sandbox = BubblewrapSandbox()
    spec = SandboxSpec(workdir=workdir, argv=["python3", "-c", probe], memory_bytes=128 << 20)
    process = start(spec, sandbox)
    out, _ = process.communicate(timeout=300)
    assert sandbox.cleanup(process)
    assert out.decode().strip() == "MemoryError"


def test_a_cpu_hog_is_killed_at_its_cpu_seconds(workdir: Path) -> None:
    sandbox = BubblewrapSandbox()
    probe = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 60: pass\nprint('done')"
    process = start(SandboxSpec(workdir=workdir, argv=["python3", "-c", probe], cpu_seconds=1), sandbox)
    out, _ = process.communicate(timeout=300)
    assert sandbox.cleanup(process)
    assert process.returncode != 0 and b"done" not in out


CPU_HOG = r"""
import sys, time
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
print("busy", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not cgroups.cpu_limit_enforceable(), reason="no cpu cgroup can be made here")
def test_cpu_limit_is_a_cpu_cgroup_quota_holding_every_process_of_the_sandbox(workdir: Path) -> None:
    """Checked from outside: the quota is set and the sandbox's processes are inside (the kernel throttles)."""
    sandbox = BubblewrapSandbox()
    process = start(SandboxSpec(workdir=workdir, argv=["python3", "-c", CPU_HOG], cpu_limit="0.5"), sandbox)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"busy\n"
        group = sandbox.prepared[process.pid].cgroup
        cpu = group.directory_of("cpu") if group is not None else None
        assert group is not None and cpu is not None
        if (cpu / "cpu.cfs_quota_us").exists():
            assert (cpu / "cpu.cfs_quota_us").read_text().split() == ["50000"]
        else:
            assert (cpu / "cpu.max").read_text().split() == ["50000", "100000"]
        inside = {int(pid) for pid in (cpu / "cgroup.procs").read_text().split()}
        assert process.pid in inside and len(inside) >= 3  # bwrap, its init and the server
        assert inside == set(group.remaining())  # the same processes as the pids cgroup
    finally:
        process.communicate(timeout=300)
        assert sandbox.cleanup(process)


@pytest.mark.skipif(cgroups.base_for("memory") is None, reason="no memory cgroup can be made here")
def test_memory_limit_also_caps_the_sandbox_as_a_whole_where_a_memory_cgroup_exists(workdir: Path) -> None:
    sandbox = BubblewrapSandbox()
    spec = SandboxSpec(workdir=workdir, argv=["python3", "-c", CPU_HOG], memory_bytes=256 << 20)
    process = start(spec, sandbox)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"busy\n"
        group = sandbox.prepared[process.pid].cgroup
        memory = group.directory_of("memory") if group is not None else None
        assert group is not None and memory is not None
        limit = memory / "memory.max"
        limit = limit if limit.exists() else memory / "memory.limit_in_bytes"
        assert limit.read_text().split() == [str(256 << 20)]
        assert {int(pid) for pid in (memory / "cgroup.procs").read_text().split()} == set(group.remaining())
    finally:
        process.communicate(timeout=300)
        assert sandbox.cleanup(process)


def test_a_cpu_limit_nothing_can_enforce_is_refused_not_ignored(workdir: Path) -> None:
    spec = SandboxSpec(workdir=workdir, argv=["true"], cpu_limit="1")
    with pytest.raises(GatewayError) as info:
        prepare(BubblewrapSandbox().bwrap, spec, cgroup=False)
    assert info.value.error_class == "sandbox_limit_unenforceable"


def test_a_100_mb_stderr_flood_is_cut_to_the_last_mib_and_the_receipt_says_so(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    path = ready(runtime, registry)
    edit_policy(path, lambda d: d["runtime"].setdefault("env", {}).update(BATON_TEST_MCP_MODE="stderr_flood"))
    observed = replay(runtime, "demo", apply=True, record=True)["protocol_observation"]
    assert observed["stderr_bytes"] > 100 * (1 << 20)
    assert observed["stderr_truncated"] is True
    assert observed["stderr_kept_bytes"] == STDERR_CAP_BYTES


def test_a_10_mb_line_is_refused_by_the_replay(runtime: Runtime, registry: NpmRegistryServer) -> None:
    path = ready(runtime, registry)
    edit_policy(
        path,
        lambda d: (
            d["runtime"]
            .setdefault("env", {})
            .update(BATON_TEST_MCP_MODE="huge_line", BATON_TEST_MCP_LINE_MB="10")
        ),
    )
    fails_with(runtime, "mcp_protocol_response_invalid", record=True)


def sandbox_cgroups() -> set[Path]:
    """The pids cgroups of sandboxes this test process made that exist right now (other baton processes on
    the machine make their own, named with their pid)."""
    base = cgroups.pids_base()
    return set(base.glob(f"baton-baton-sandbox-{os.getpid()}-*")) if base is not None else set()


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """baton's temp files go to a fresh directory (world-traversable, as the sandbox needs)."""
    directory = world_readable_dir("baton-private-tmp-")
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def leftovers(directory: Path) -> list[Path]:
    """What baton left in the temp dir: anything but its own (empty) ``baton-UID`` directory."""
    own = directory / f"baton-{os.geteuid()}"
    return [p for p in directory.rglob("*") if p != own]


def unsafe_tarball() -> bytes:
    import tarfile

    escape = tarfile.TarInfo("package/../escape.js")
    escape.size = 1
    return build_tarball(package_files(), [(escape, b"x")])


@pytest.mark.parametrize(
    ("change", "error_class"),
    [
        ("extraction", "artifact_archive_path_invalid"),
        ("replay", "mcp_protocol_response_timeout"),
        ("start", "mcp_protocol_response_invalid"),
        ("never_exits", "mcp_process_shutdown_timeout"),
    ],
)
def test_no_temp_tree_survives_a_failure(
    runtime: Runtime, registry: NpmRegistryServer, private_tmp: Path, change: str, error_class: str
) -> None:
    path = ready(runtime, registry, tarball=unsafe_tarball() if change == "extraction" else None)

    def mutate(document: dict[str, Any]) -> None:
        env = document["runtime"].setdefault("env", {})
        if change == "replay":
            env["BATON_TEST_MCP_MODE"] = "silent"
            document["runtime"]["startup_timeout_seconds"] = 1
        if change == "start":
            # the pinned interpreter with a script that is not there: the tree is made, the start fails
            document["runtime"]["entrypoint"] = ["python3", "node_modules/baton-test-mcp/missing.py"]
        if change == "never_exits":
            env["BATON_TEST_MCP_MODE"] = "ignore_eof"
            document["runtime"]["shutdown_timeout_seconds"] = 1

    edit_policy(path, mutate)
    assert leftovers(private_tmp) == []
    before = sandbox_cgroups()
    fails_with(runtime, error_class, record=True)
    assert leftovers(private_tmp) == []
    assert sandbox_cgroups() <= before


def test_a_mount_that_does_not_exist_fails_before_anything_is_made(
    runtime: Runtime, registry: NpmRegistryServer, private_tmp: Path
) -> None:
    path = ready(runtime, registry)
    edit_policy(
        path, lambda d: d["runtime"].update(mounts=[{"host": "/srv/baton-missing", "sandbox": "/data"}])
    )
    fails_with(runtime, "adapter_mount_invalid", record=True)
    assert leftovers(private_tmp) == []


def unprivileged_python() -> list[str] | None:
    """A python the unprivileged user can run with this checkout and its dependencies on the path."""
    site = next((p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()), None)
    python = shutil.which("python3", path="/usr/bin:/bin")
    if site is None or python is None or shutil.which("setpriv") is None:
        return None
    source = Path(__file__).resolve().parents[2] / "src"
    return [
        "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
        f"PYTHONPATH={source}:{site}", python,
    ]  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become the unprivileged user")
def test_a_replay_runs_when_baton_is_an_ordinary_user(runtime: Runtime, registry: NpmRegistryServer) -> None:
    """CI runs as root: this replay runs as uid 65534 itself (no cgroup, RLIMIT_NPROC scope)."""
    command = unprivileged_python()
    assert command is not None, "setpriv and a system python3 are needed (util-linux, python3)"
    reach = subprocess.run(
        [*command, "-c", "import baton.gateway.replay.replay, mcp, pydantic, sqlalchemy, typer"],
        capture_output=True,
        check=False,
        cwd="/",
    )
    if reach.returncode != 0:  # e.g. a checkout or virtualenv under a 0700 home
        pytest.skip(f"uid 65534 cannot import this checkout: {reach.stderr.decode()[-300:]}")
    ready(runtime, registry)
    replay(runtime, "demo", apply=True, record=True)
    home = world_readable_dir("baton-unprivileged-")
    try:
        shutil.copytree(runtime.settings.home, home / "home")
        subprocess.run(["chown", "-R", "65534:65534", str(home)], check=True)
        result = subprocess.run(
            [*command, "-m", "baton", "gateway", "replay", "demo", "--apply", "--json"],
            capture_output=True,
            timeout=120,
            check=False,
            cwd=home,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "BATON_HOME": str(home / "home")},
        )
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        observed = json.loads(result.stdout)
        assert observed["protocol_observation"]["server_name"] == "baton-test-mcp"
        receipt_file = home / "home" / "gateway" / "demo" / "receipts" / f"replay-{observed['run_id']}.json"
        receipt = json.loads(receipt_file.read_text())
        assert receipt["stage_receipts"]["risk_policy"]["host_uid"] == 65534
        assert receipt_file.stat().st_uid == 65534  # written by the unprivileged baton itself
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_replay_of_a_pinned_contract_fails_cleanly_when_the_sandbox_refuses(
    runtime: Runtime, registry: NpmRegistryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No seccomp binding: the sandbox refuses to start (fail closed), with sandbox_unavailable."""
    from baton.gateway.sandbox import seccomp

    ready(runtime, registry)

    def missing() -> bytes:
        raise seccomp.SeccompUnavailableError("libseccomp's Python binding (pyseccomp) cannot load")

    monkeypatch.setattr(seccomp, "filter_bpf", missing)
    with pytest.raises(GatewayError) as info:
        replay(runtime, "demo", apply=True, record=True)
    assert info.value.error_class == "sandbox_unavailable"
    assert "seccomp" in info.value.message


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_failed_upstream_start_leaves_no_tree(
    runtime: Runtime, registry: NpmRegistryServer, private_tmp: Path
) -> None:
    """At run time too: a bundle that no longer matches its pins fails the start and leaves nothing."""
    import anyio

    from baton.gateway.policy.policy_files import load_policy
    from baton.gateway.serving.upstream import Upstream

    path = ready(runtime, registry)
    tarball = next((runtime.settings.home / "gateway" / "demo" / "bundle" / "tarballs").iterdir())
    tarball.write_bytes(tarball.read_bytes() + b"\0")
    policy, _ = load_policy(path)
    upstream = Upstream(runtime, policy, lambda error, evidence: None)
    async with anyio.create_task_group() as group:
        with pytest.raises(GatewayError) as info:
            await upstream.ensure(group)
        await upstream.close()
    assert info.value.error_class == "artifact_tarball_checksum_mismatch"
    assert leftovers(private_tmp) == []


def test_the_leftovers_of_a_killed_baton_are_swept_and_a_live_ones_are_kept(private_tmp: Path) -> None:
    from baton.gateway.sandbox import scratch

    dead = subprocess.Popen(["true"])
    dead.wait()
    left = private_tmp / f"baton-upstream-{dead.pid}-abc"
    (left / "node_modules").mkdir(parents=True)
    (left / "node_modules").chmod(0o555)  # read-only, like an extracted tree
    mine = scratch.make("replay")
    group = None
    base = cgroups.pids_base()
    if base is not None:
        group = base / f"baton-baton-sandbox-{dead.pid}-abc"
        group.mkdir()
    removed = scratch.sweep()
    assert left.name in removed and not left.exists()
    assert mine.exists() and mine.name not in removed  # this process is alive
    if group is not None:
        assert group.name in removed and not group.exists()
    scratch.remove(mine)
