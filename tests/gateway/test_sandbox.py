"""A probe inside the bubblewrap sandbox sees what the policy promises: nobody, no caps, no network,
no exec from /tmp, the seccomp filter, no host paths, and exactly the host directories the policy mounts."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.gateway.sandbox import bwrap_command, seccomp
from baton.gateway.sandbox.docker import DockerSandbox
from baton.gateway.sandbox.sandbox import BubblewrapSandbox
from baton.gateway.sandbox.sandbox_spec import HostMount, SandboxSpec

pytestmark = pytest.mark.needs("bwrap")  # fails under CI, skips elsewhere (tests/needs.py)

PROBE = r"""
import ctypes, json, os, shutil, socket, subprocess
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
def run(path):
    subprocess.run([path], check=True)
def dropped_script():
    write("/tmp/dropped.sh")
    with open("/tmp/dropped.sh", "w") as handle:
        handle.write("#!/bin/sh\necho ran\n")
    os.chmod("/tmp/dropped.sh", 0o755)
    run("/tmp/dropped.sh")
def dropped_binary(directory="/tmp"):
    shutil.copy("/usr/bin/true", directory + "/true")
    os.chmod(directory + "/true", 0o755)
    run(directory + "/true")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def syscall(number, args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *[ctypes.c_long(a) for a in args])
    return 0 if result >= 0 else ctypes.get_errno()
calls = json.loads(os.environ.get("PROBE_SYSCALLS", "{}"))
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
mounted = {}
if os.path.isdir("/data"):
    mounted = {
        "read_ro": open("/data/ro/hello.txt").read(),
        "write_ro": attempt(lambda: write("/data/ro/new.txt")),
        "write_rw": attempt(lambda: write("/data/rw/out.txt")),
        "exec_rw_binary": attempt(lambda: dropped_binary("/data/rw")),
    }
if os.path.isdir("/data/rwx"):
    mounted["exec_rwx_binary"] = attempt(lambda: dropped_binary("/data/rwx"))
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
    "seccomp": status["Seccomp"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
    "interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
    "connect": attempt(connect),
    "write_root": attempt(lambda: write("/probe")),
    "write_work": attempt(lambda: write("/work/probe")),
    "write_tmp": attempt(lambda: write("/tmp/probe")),
    "exec_tmp_script": attempt(dropped_script),
    "exec_tmp_binary": attempt(dropped_binary),
    "exec_usr": attempt(lambda: run("/usr/bin/true")),
    "read_secret": attempt(lambda: open("/secret").read()),
    "see_host_home": os.path.exists("/root") or os.path.exists("/home"),
    "root_listing": sorted(os.listdir("/")),
    "work_listing": sorted(os.listdir("/work")),
    "cwd": os.getcwd(),
    "mountinfo": open("/proc/self/mountinfo").read(),
    "pid1_cmdline": open("/proc/1/cmdline").read(),
    "pid1": open("/proc/1/cmdline").read().split("\0")[0],
    "limits": {l[:25].strip(): l[25:].split()[0] for l in open("/proc/self/limits").readlines()[1:]},
    "syscalls": {name: syscall(number, args) for name, (number, args) in calls.items()},
    "mounted": mounted,
}))
"""
CLONE_THREAD = 0x00010000
#: Calls whose answer without the filter is not EPERM: together they prove the filter is what refuses.
CONTROL = ("unshare", "clone:0x10000000", "personality", "ptrace", "keyctl", "chroot")


def syscall_table() -> dict[str, tuple[int, list[int]]]:
    """name → (number, arguments) for every call the filter denies, resolved by libseccomp."""
    import pyseccomp  # type: ignore[import-untyped]

    def number(name: str) -> int:
        return int(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name))

    table = {name: (number(name), [0, 0, 0, 0, 0, 0]) for name in seccomp.DENIED}
    for flag in seccomp.CLONE_NAMESPACE_FLAGS:  # with CLONE_THREAD the kernel itself says EINVAL
        table[f"clone:{flag:#x}"] = (number("clone"), [flag | CLONE_THREAD, 0, 0, 0, 0, 0])
    table["personality"] = (number("personality"), [0x0040000, 0, 0, 0, 0, 0])  # ADDR_NO_RANDOMIZE
    table["clone3"] = (number("clone3"), [0, 0, 0, 0, 0, 0])
    return table


def world_readable_dir(prefix: str) -> Path:
    """A fresh directory the sandbox's user can traverse (pytest's tmp_path is 0700)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    return directory


def run_probe(spec: SandboxSpec, sandbox: BubblewrapSandbox | None = None) -> dict[str, Any]:
    """Run PROBE in the sandbox; the sandbox's staging directory must be gone afterwards."""
    sandbox = sandbox or BubblewrapSandbox()
    process = sandbox.start(spec, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=300)
    assert sandbox.cleanup(process), "the staging directory or cgroup survived"
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.fixture(scope="module")
def secret_file() -> Iterator[Path]:
    """A 0600 file owned by root in a world-traversable directory."""
    directory = world_readable_dir("baton-secret-")
    secret = directory / "secret"
    secret.write_text("root only")
    secret.chmod(0o600)
    yield secret
    shutil.rmtree(directory)


@pytest.fixture(scope="module")
def host_dirs() -> Iterator[dict[str, Path]]:
    """A read-only mount with one file, a read-write one the sandbox's user owns, and the workdir."""
    base = world_readable_dir("baton-mounts-")
    ro, rw, rwx, workdir = base / "ro", base / "rw", base / "rwx", base / "workdir"
    for directory in (ro, rw, rwx, workdir):
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)
    (ro / "hello.txt").write_text("hello from the host")
    (ro / "hello.txt").chmod(0o644)
    (workdir / "marker").write_text("visible")
    (workdir / "marker").chmod(0o444)
    if os.geteuid() == 0:
        os.chown(rw, 65534, 65534)
        os.chown(rwx, 65534, 65534)
    yield {"base": base, "ro": ro, "rw": rw, "rwx": rwx, "workdir": workdir}
    shutil.rmtree(base)


@pytest.fixture(scope="module")
def probe(secret_file: Path, host_dirs: dict[str, Path]) -> dict[str, Any]:
    """Run the probe once in the sandbox the replay uses, with the two mounts and every denied call."""
    spec = SandboxSpec(
        workdir=host_dirs["workdir"],
        argv=["python3", "-c", PROBE],
        env={"PROBE_SYSCALLS": json.dumps(syscall_table())},
        extra_ro_binds=((secret_file, "/secret"),),
        mounts=(
            HostMount(host_dirs["ro"], "/data/ro", "ro"),
            HostMount(host_dirs["rw"], "/data/rw", "rw"),
            HostMount(host_dirs["rwx"], "/data/rwx", "rw", exec=True),
        ),
    )
    return run_probe(spec)


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
    assert probe["cwd"] == "/work"


def test_nothing_dropped_into_tmp_can_be_executed(probe: dict[str, object]) -> None:
    assert probe["exec_tmp_script"] == "PermissionError"
    assert probe["exec_tmp_binary"] == "PermissionError"
    assert probe["exec_usr"] == "ok"  # the control: executing is possible where it is allowed
    tmp = [line for line in str(probe["mountinfo"]).splitlines() if line.split(" ")[4] == "/tmp"]
    assert len(tmp) == 1 and "noexec" in tmp[0].split(" ")[5].split(",")


def test_a_binary_copied_into_an_rw_mount_cannot_run_unless_the_policy_says_exec(
    probe: dict[str, Any], host_dirs: dict[str, Path]
) -> None:
    mounted = probe["mounted"]
    assert mounted["exec_rw_binary"] == "PermissionError"  # copied, chmod 755, execve: EACCES
    assert (host_dirs["rw"] / "true").exists()  # the copy itself was written
    assert mounted["exec_rwx_binary"] == "ok"  # the control: exec = true for that mount
    lines = {
        line.split(" ")[4]: line.split(" ")[5].split(",") for line in str(probe["mountinfo"]).splitlines()
    }
    assert {"noexec", "nosuid", "nodev"} <= set(lines["/data/rw"])
    assert "noexec" not in lines["/data/rwx"]


def test_the_host_path_of_the_tree_is_not_visible_inside(
    probe: dict[str, Any], host_dirs: dict[str, Path]
) -> None:
    for text in (probe["mountinfo"], probe["pid1_cmdline"]):
        assert str(host_dirs["workdir"]) not in text
        assert "baton-sandbox-" not in text  # the staging directory
    bwrap = BubblewrapSandbox().bwrap
    assert probe["pid1_cmdline"].startswith(f"{bwrap}\0--args\0" + "3\0--\0python3\0")
    work = [line for line in probe["mountinfo"].splitlines() if line.split(" ")[4] == "/work"]
    assert work and work[0].split(" ")[3] == "/"  # the tree's own tmpfs, not a host directory


def test_ro_mounts_are_readable_not_writable_and_rw_mounts_are_writable(
    probe: dict[str, Any], host_dirs: dict[str, Path]
) -> None:
    mounted = probe["mounted"]
    assert mounted["read_ro"] == "hello from the host"
    assert mounted["write_ro"] == "OSError"
    assert not (host_dirs["ro"] / "new.txt").exists()
    assert mounted["write_rw"] == "ok"
    written = host_dirs["rw"] / "out.txt"
    assert written.read_text() == "x"
    if os.geteuid() == 0:
        assert written.stat().st_uid == 65534  # the sandbox writes as host uid 65534, never as root


def test_nothing_outside_the_mounts_is_visible(probe: dict[str, Any], host_dirs: dict[str, Path]) -> None:
    assert set(probe["root_listing"]) <= {
        "bin", "data", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "secret", "tmp",
        "usr", "work",
    }  # fmt: skip
    assert str(host_dirs["base"]) not in probe["mountinfo"].replace(str(host_dirs["ro"]), "").replace(
        str(host_dirs["rw"]), ""
    )


def test_every_denied_system_call_answers_eperm(probe: dict[str, Any]) -> None:
    assert probe["seccomp"] == "2" and probe["no_new_privs"] == "1"
    results = probe["syscalls"]
    denied = {name: value for name, value in results.items() if name != "clone3"}
    assert denied and all(value == errno.EPERM for value in denied.values()), {
        name: errno.errorcode.get(value, value) for name, value in denied.items() if value != errno.EPERM
    }
    assert results["clone3"] == errno.ENOSYS


def test_without_the_filter_the_same_calls_answer_otherwise(
    monkeypatch: pytest.MonkeyPatch, host_dirs: dict[str, Path]
) -> None:
    """The control run: the EPERMs above come from the filter, not from missing privileges."""
    original = bwrap_command.bwrap_args

    def without_seccomp(spec: SandboxSpec, stage: Path) -> list[str]:
        args = original(spec, stage)
        index = args.index("--seccomp")
        return args[:index] + args[index + 2 :]

    monkeypatch.setattr(bwrap_command, "bwrap_args", without_seccomp)
    table = {name: value for name, value in syscall_table().items() if name in CONTROL}
    spec = SandboxSpec(
        workdir=host_dirs["workdir"], argv=["python3", "-c", PROBE], env={"PROBE_SYSCALLS": json.dumps(table)}
    )
    unfiltered = run_probe(spec)
    assert unfiltered["seccomp"] == "0"
    assert unfiltered["syscalls"]["unshare"] == 0
    assert unfiltered["syscalls"]["clone:0x10000000"] == errno.EINVAL
    assert unfiltered["syscalls"]["personality"] == 0
    assert set(unfiltered["syscalls"]) == set(CONTROL)
    assert errno.EPERM not in unfiltered["syscalls"].values(), unfiltered["syscalls"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the pitfall only exists when baton runs as root")
def test_a_root_only_host_file_stays_unreadable_because_bwrap_starts_as_65534(
    probe: dict[str, object],
) -> None:
    assert probe["read_secret"] == "PermissionError"


def test_the_rlimits_reach_the_sandboxed_process(probe: dict[str, object]) -> None:
    from baton.gateway.sandbox.cgroups import pids_base

    limits = probe["limits"]
    assert isinstance(limits, dict)
    assert limits["Max data size"] == str(2 << 30)
    assert limits["Max cpu time"] == "120"
    if pids_base() is None:  # with a pids cgroup the limit is pids.max (tests/gateway/test_hostile.py)
        assert limits["Max processes"] == "256"


def test_the_server_runs_in_its_own_pid_namespace_under_bwrap(probe: dict[str, object]) -> None:
    assert str(probe["pid1"]).endswith("bwrap")


def test_the_bwrap_command_keeps_its_isolation_flags_and_order(tmp_path: Path) -> None:
    spec = SandboxSpec(
        workdir=tmp_path, argv=["node", "cli.js"], extra_ro_binds=((tmp_path, "/tmp/visible"),)
    )
    command = bwrap_command.bwrap_args(spec, tmp_path / "stage")
    for flag in ("--unshare-user", "--unshare-all", "--new-session", "--die-with-parent", "--clearenv"):
        assert flag in command
    assert command[command.index("--uid") + 1] == "65534" and command[command.index("--gid") + 1] == "65534"
    assert command[command.index("--cap-drop") + 1] == "ALL"
    assert command[command.index("--seccomp") + 1] == "4"
    assert "--share-net" not in command
    assert command.index(str(tmp_path / "stage" / "tmp")) < command.index("/tmp/visible")
    assert command.index("--remount-ro") > command.index("/tmp/visible")
    assert "node" not in command  # the server's argv follows ``--`` on bwrap's own command line


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
    from baton.gateway.sandbox.bwrap_command import rlimit_prefix

    spec = SandboxSpec(workdir=tmp_path, argv=["true"], memory_bytes=1 << 30, pids_limit=64, cpu_seconds=9)
    assert rlimit_prefix(spec)[1:] == [f"--data={1 << 30}", "--nproc=64", "--cpu=9", "--core=0", "--"]
    assert rlimit_prefix(spec, nproc=False)[1:] == [f"--data={1 << 30}", "--cpu=9", "--core=0", "--"]


def test_doctor_states_seccomp_and_the_pids_scope_and_apparmors_userns_switch(tmp_path: Path) -> None:
    from baton.gateway.sandbox import cgroups
    from baton.gateway.sandbox.sandbox import sandbox_report, userns_restriction

    ok, detail = sandbox_report()
    assert ok and "seccomp filter" in detail and cgroups.scope() in detail and "noexec" in detail
    switch = tmp_path / "apparmor_restrict_unprivileged_userns"
    switch.write_text("1\n")
    assert "apparmor_restrict_unprivileged_userns=1" in str(userns_restriction(switch))
    switch.write_text("0\n")
    assert userns_restriction(switch) is None
    assert userns_restriction(tmp_path / "absent") is None
