"""The Landlock sandbox: for hosts where bubblewrap cannot start (Ubuntu's AppArmor blocks user namespaces).

It needs no namespace and no privilege. The launcher (:mod:`baton.gateway.sandbox.landlock_exec`) runs as
host uid 65534 when baton is root (the calling user otherwise), starts a new session, dies with baton, sets
the policy's rlimits, then confines itself before it executes the server:

- **Landlock filesystem rules**: read and execute under the host's ``/usr``, ``/bin``, ``/lib``…, the
  extracted tree (read-only) and mounts a policy names at their own paths; read a few files of ``/etc``
  (the loader cache, CA certificates) and ``/proc``; write and create only in a private temporary
  directory (``HOME``, ``TMPDIR``), where nothing may be executed. Everything else is denied, including
  the rest of ``/etc``, ``/home``, ``/root`` and ``BATON_HOME``.
- **No network**: seccomp refuses ``socket`` for every family but AF_UNIX; Landlock ABI 4+ also denies
  TCP bind and connect; ABI 6+ scopes abstract unix sockets and signals to the sandbox.
- **seccomp**: the bubblewrap sandbox's filter (:mod:`baton.gateway.sandbox.seccomp`), which also refuses
  ``unshare``, ``mount``, ``ptrace`` and namespace ``clone`` flags.

What it does not isolate (docs/gateway.md says so too): no PID namespace (``/proc`` lists the host's
processes), no mount namespace (``/work`` is the tree's host path, and a mount must be at its own path),
no private ``/tmp`` size cap (only RLIMIT_FSIZE per file), no cgroup limits (``cpu_limit`` is refused;
memory is RLIMIT_DATA per process, processes RLIMIT_NPROC per uid), AF_UNIX sockets the uid may open.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from baton.errors import GatewayError
from baton.gateway.sandbox import landlock_exec, scratch, seccomp
from baton.gateway.sandbox.bwrap_command import HOST_PATH, Prepared
from baton.gateway.sandbox.sandbox_spec import SANDBOX_WORKDIR, SandboxSpec, as_nobody

LAUNCHER = Path(landlock_exec.__file__)
SYSTEM_EXEC = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
SYSTEM_READ = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf", "/etc/localtime", "/proc", "/dev/urandom", "/dev/random",
)  # fmt: skip
DEVICES = ("/dev/null", "/dev/zero")
#: What the Landlock sandbox leaves shared with the host (doctor and the replay receipt say so).
NOT_ISOLATED = (
    "no PID namespace (/proc lists the host's processes)",
    "no mount namespace (mounts only at their own paths)",
    "no cgroup (memory per process, processes per uid, cpu_limit refused)",
    "no /tmp size cap (per-file RLIMIT_FSIZE only)",
    "AF_UNIX sockets the uid may open",
)
#: euids for which a probe sandbox has started in this process.
_VERIFIED: set[int] = set()


def abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    return landlock_exec.abi_version()


def _python() -> str:
    """The launcher's interpreter: the host's python3 (in /usr, which uid 65534 can run), else baton's."""
    return shutil.which("python3", path=HOST_PATH) or os.path.realpath(sys.executable)


def _in_tree(value: str, tree: Path) -> str:
    """``/work/…`` (where bubblewrap binds the tree) as the tree's host path; no mount namespace here."""
    if value == SANDBOX_WORKDIR or value.startswith(SANDBOX_WORKDIR + "/"):
        return str(tree) + value[len(SANDBOX_WORKDIR) :]
    return value


def _rules(spec: SandboxSpec, tmp: Path) -> list[list[str]]:
    """The Landlock rules of one start: system, tree, temporary directory, mounts at their own paths."""
    rules = [[p, "exec"] for p in SYSTEM_EXEC] + [[p, "read"] for p in SYSTEM_READ]
    rules += [[p, "device"] for p in DEVICES]
    rules += [[str(spec.workdir), "exec"], [str(tmp), "write"]]
    for mount in spec.mounts:
        if str(mount.host) != mount.sandbox:
            raise GatewayError(
                "sandbox_unavailable",
                f"The Landlock sandbox has no mount namespace: the mount {mount.host} can only appear at its "
                f"own path, not at {mount.sandbox}.",
            )
        rules.append([str(mount.host), "write" if mount.mode == "rw" else "exec"])
        if mount.mode == "rw" and mount.exec:
            rules.append([str(mount.host), "exec"])
    rules += [[str(source), "exec"] for source, target in spec.extra_ro_binds if str(source) == target]
    rules += [[path, "write"] for path in spec.extra_tmpfs]  # the host's own /dev/shm: no private one here
    return rules


def _rlimits(spec: SandboxSpec) -> dict[str, int]:
    _, size = spec.tmpfs_path_and_size()
    limits = {"data": spec.memory_bytes, "nproc": spec.pids_limit, "cpu": spec.cpu_seconds, "core": 0}
    return limits | ({"fsize": size} if size else {})


def prepare(spec: SandboxSpec) -> Prepared:
    """Write the launcher's config, its seccomp program and the temporary directory; the argv to start."""
    if spec.cpu_limit:
        raise GatewayError(
            "sandbox_limit_unenforceable",
            f"The policy sets cpu_limit = {spec.cpu_limit!r}, which the Landlock sandbox cannot enforce "
            "(no cgroup). Remove cpu_limit (cpu_seconds still bounds the CPU time).",
        )
    try:
        program = seccomp.filter_bpf(no_network=True)
    except seccomp.SeccompUnavailableError as exc:
        raise GatewayError("sandbox_unavailable", f"No seccomp filter, so no sandbox: {exc}.") from None
    stage = scratch.make("sandbox")
    try:
        stage.chmod(0o755)
        tmp = stage / "tmp"
        tmp.mkdir(mode=0o777)
        tmp.chmod(0o1777)
        tree = spec.workdir
        env = {"HOME": str(tmp), "TMPDIR": str(tmp), "CI": "1", "PATH": f"{HOST_PATH}:{tree}/bin", **spec.env}
        config = {
            "argv": [_in_tree(arg, tree) for arg in spec.argv],
            "env": {k: ":".join(_in_tree(p, tree) for p in v.split(":")) for k, v in env.items()},
            "cwd": str(tree),
            "parent": os.getpid(),  # the launcher dies with baton; it refuses to start if baton is gone
            "rlimits": _rlimits(spec),
            "rules": _rules(spec, tmp),
            "seccomp": str(stage / "seccomp.bpf"),
        }
        (stage / "seccomp.bpf").write_bytes(program)
        (stage / "config.json").write_text(json.dumps(config), encoding="utf-8")
        shutil.copyfile(LAUNCHER, stage / "launcher.py")  # readable by uid 65534 wherever baton lives
        for name in ("seccomp.bpf", "config.json", "launcher.py"):
            (stage / name).chmod(0o444)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    argv = [_python(), "-I", "-S", str(stage / "launcher.py"), str(stage / "config.json")]
    return LandlockPrepared(argv, stage)


class LandlockPrepared(Prepared):
    """A Landlock start: no pid namespace takes the tree down, so cleanup kills the server's session."""

    pid: int | None = None

    def started(self, pid: int) -> None:
        """Remember the launcher's pid (the launcher makes it its session and process group)."""
        self.pid = pid

    def cleanup(self) -> bool:
        """Kill what is left of the server's process group, then remove the stage."""
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
        return super().cleanup()


class LandlockSandbox:
    """Landlock, seccomp and rlimits on the server itself, as host uid 65534 when baton is root."""

    name = "landlock"

    def __init__(self) -> None:
        self.prepared: dict[int, Prepared] = {}

    def unavailable_reason(self) -> str | None:
        """None when a probe start through the launcher succeeds here (remembered per uid), else why not."""
        if abi() < 1:
            return "the kernel offers no Landlock (Linux 5.13+ with landlock among its LSMs)"
        reason = seccomp.unavailable_reason()
        if reason:
            return f"no seccomp filter can be built: {reason}"
        if os.geteuid() in _VERIFIED:
            return None
        workdir = scratch.make("replay")
        workdir.chmod(0o755)
        try:
            process = self.start(SandboxSpec(workdir=workdir, argv=["true"]), stderr=subprocess.PIPE)
            _, err = process.communicate(timeout=30)
            self.cleanup(process)
        except (OSError, subprocess.TimeoutExpired, GatewayError) as exc:
            return f"the Landlock sandbox could not be started: {exc}"
        finally:
            scratch.remove(workdir)
        if process.returncode != 0:
            return f"the Landlock sandbox could not start a process: {err.decode(errors='replace').strip()[:300]}"
        _VERIFIED.add(os.geteuid())
        return None

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start the launcher (which confines itself, then executes the server) with stdin/stdout as pipes."""
        prepared = prepare(spec)
        user, group, groups = as_nobody()
        try:
            process = subprocess.Popen(
                prepared.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env={"PATH": HOST_PATH}, close_fds=True, user=user, group=group, extra_groups=groups,
            )  # fmt: skip
        except OSError as exc:
            prepared.cleanup()
            raise GatewayError(
                "mcp_process_start_failed", f"The launcher could not be started: {exc}."
            ) from None
        prepared.started(process.pid)
        self.prepared[process.pid] = prepared
        return process

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """Kill the server's process group and remove the stage."""
        prepared = self.prepared.pop(process.pid, None)
        removed = prepared.cleanup() if prepared is not None else True
        return process.poll() is not None and removed


def enforcement(policy: Any) -> dict[str, Any]:
    """What the Landlock sandbox enforced for ``policy`` (a :class:`~baton.gateway.policy.policy.Policy`)."""
    runtime = policy.runtime
    return {
        "landlock_abi": abi(),
        "seccomp_denied_syscalls": len(seccomp.DENIED),
        "socket_families": "AF_UNIX only",
        "tcp_denied_by_landlock": abi() >= 4,
        "tmp_noexec": True,
        "pids_limit": runtime.pids_limit,
        "pids_limit_scope": "host_uid",
        "memory_limit": runtime.memory_limit,
        "memory_limit_scope": "process",
        "cpu_seconds_per_process": runtime.cpu_seconds,
        "not_isolated": list(NOT_ISOLATED),
    }


def report() -> str:
    """``baton doctor``'s account of the Landlock sandbox: what it enforces here and what it does not."""
    version = abi()
    net = "seccomp refuses every socket but AF_UNIX" + (", Landlock denies TCP" if version >= 4 else "")
    scope = ", abstract unix sockets and signals scoped" if version >= 6 else ""
    user = "host uid 65534" if os.geteuid() == 0 else f"the calling user (uid {os.geteuid()})"
    return (
        f"Landlock ABI {version}, started as {user}: filesystem rules (read-only system and tree, "
        f"writes only in a private noexec temporary directory); {net}{scope}; seccomp filter of "
        f"{len(seccomp.DENIED)} denied calls; rlimits. Not isolated: {'; '.join(NOT_ISOLATED)}"
    )
