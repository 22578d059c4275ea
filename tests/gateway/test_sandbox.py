"""A probe inside the bubblewrap sandbox sees what the policy promises: nobody, no caps, no network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.gateway.sandbox import BubblewrapSandbox, DockerSandbox, SandboxSpec
from tests.needs import require

PROBE = r"""
import json, os, socket
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__
def connect():
    with socket.create_connection(("1.1.1.1", 53), timeout=2):
        pass
def write(path):
    with open(path, "w") as handle:
        handle.write("x")
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
    "interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
    "connect": attempt(connect),
    "write_root": attempt(lambda: write("/probe")),
    "write_work": attempt(lambda: write("/work/probe")),
    "write_tmp": attempt(lambda: write("/tmp/probe")),
    "read_secret": attempt(lambda: open("/secret").read()),
    "see_host_home": os.path.exists("/root") or os.path.exists("/home"),
    "work_listing": sorted(os.listdir("/work")),
    "pid1": open("/proc/1/cmdline").read().split("\0")[0],
    "limits": {l[:25].strip(): l[25:].split()[0] for l in open("/proc/self/limits").readlines()[1:]},
}))
"""


@pytest.fixture(scope="module")
def secret_file() -> Iterator[Path]:
    """A 0600 file owned by root in a world-traversable directory."""
    directory = Path(tempfile.mkdtemp(prefix="baton-secret-"))
    directory.chmod(0o755)
    secret = directory / "secret"
    secret.write_text("root only")
    secret.chmod(0o600)
    yield secret
    shutil.rmtree(directory)


@pytest.fixture(scope="module")
def probe(secret_file: Path) -> dict[str, object]:
    """Run the probe once in the sandbox the replay uses."""
    require("bwrap")
    sandbox = BubblewrapSandbox()
    workdir = Path(tempfile.mkdtemp(prefix="baton-probe-"))
    workdir.chmod(0o755)
    (workdir / "marker").write_text("visible")
    (workdir / "marker").chmod(0o444)
    spec = SandboxSpec(
        workdir=workdir, argv=["python3", "-c", PROBE], extra_ro_binds=((secret_file, "/secret"),)
    )
    with tempfile.TemporaryFile() as stderr:
        process = sandbox.start(spec, stderr=stderr)
        out, _ = process.communicate(timeout=30)
        stderr.seek(0)
        assert process.returncode == 0, stderr.read().decode()
    shutil.rmtree(workdir)
    result: dict[str, object] = json.loads(out)
    return result


def test_the_sandboxed_process_is_nobody_with_no_capabilities(probe: dict[str, object]) -> None:
    assert (probe["uid"], probe["gid"], probe["euid"]) == (65534, 65534, 65534)
    assert probe["cap_eff"] == "0000000000000000"
    assert probe["cap_bnd"] == "0000000000000000"


def test_the_sandbox_has_only_loopback_and_cannot_connect_out(probe: dict[str, object]) -> None:
    assert probe["interfaces"] == ["lo"]
    assert probe["connect"] != "ok"


def test_the_root_is_read_only_and_only_tmp_is_writable(probe: dict[str, object]) -> None:
    assert probe["write_root"] == "OSError"
    assert probe["write_work"] == "OSError"
    assert probe["write_tmp"] == "ok"
    assert probe["work_listing"] == ["marker"]
    assert probe["see_host_home"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="the pitfall only exists when baton runs as root")
def test_a_root_only_host_file_stays_unreadable_because_bwrap_starts_as_65534(
    probe: dict[str, object],
) -> None:
    assert probe["read_secret"] == "PermissionError"


def test_the_rlimits_reach_the_sandboxed_process(probe: dict[str, object]) -> None:
    limits = probe["limits"]
    assert isinstance(limits, dict)
    assert limits["Max data size"] == str(2 << 30)
    assert limits["Max processes"] == "256"
    assert limits["Max cpu time"] == "120"


def test_the_server_runs_in_its_own_pid_namespace_under_bwrap(probe: dict[str, object]) -> None:
    assert str(probe["pid1"]).endswith("bwrap")


def test_the_bwrap_command_keeps_its_isolation_flags_and_order(tmp_path: Path) -> None:
    command = BubblewrapSandbox("/usr/bin/bwrap").command(
        SandboxSpec(workdir=tmp_path, argv=["node", "cli.js"], extra_ro_binds=((tmp_path, "/tmp/visible"),))
    )
    for flag in ("--unshare-user", "--unshare-all", "--new-session", "--die-with-parent", "--clearenv"):
        assert flag in command
    assert command[command.index("--uid") + 1] == "65534" and command[command.index("--gid") + 1] == "65534"
    assert command[command.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in command
    assert command.index("--tmpfs") < command.index("/tmp/visible")
    assert command.index("--remount-ro") > command.index("/tmp/visible")
    assert command[-3:] == ["--", "node", "cli.js"]


def test_the_docker_backend_uses_the_reference_flags_or_skips_with_its_reason(tmp_path: Path) -> None:
    sandbox = DockerSandbox("/usr/bin/docker")
    command = sandbox.command(
        SandboxSpec(workdir=tmp_path, argv=["node", "cli.js"], image="registry.local/node@sha256:" + "0" * 64)
    )
    for flag, value in [
        ("--network", "none"),
        ("--security-opt", "no-new-privileges"),
        ("--cap-drop", "ALL"),
        ("--user", "65534:65534"),
    ]:
        assert command[command.index(flag) + 1] == value
    assert "--read-only" in command
    reason = DockerSandbox().unavailable_reason()
    if reason:
        pytest.skip(f"Docker backend not exercised: {reason}")
    probe = subprocess.run(["docker", "version"], capture_output=True, check=False)
    assert probe.returncode == 0


def test_limits_are_set_by_prlimit_before_bwrap(tmp_path: Path) -> None:
    from baton.gateway.sandbox import rlimit_prefix

    prefix = rlimit_prefix(
        SandboxSpec(workdir=tmp_path, argv=["true"], memory_bytes=1 << 30, pids_limit=64, cpu_seconds=9)
    )
    assert prefix[1:] == [f"--data={1 << 30}", "--nproc=64", "--cpu=9", "--core=0", "--"]
