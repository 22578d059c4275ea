"""Sandboxes for an external MCP server: bubblewrap (default) and Docker behind one interface.

How a bubblewrap sandbox is built (each step exists to make a promise of the policy true):

1. ``prlimit`` sets the rlimits (no ``preexec_fn``, which is unsafe in a threaded server), then execs
2. ``unshare --user --map-root-user --mount`` as host uid 65534 (when baton runs as root; an
   unprivileged caller stays itself): a private user and mount namespace that only prepares mounts,
3. ``/bin/sh`` (:data:`LAUNCHER`) which, as that namespace's root, mounts the policy's tmpfs with its
   exact options (``noexec`` included: bwrap's own ``--tmpfs`` cannot be noexec, a mount made here
   is, and the flag is locked for the namespaces below), copies the extracted tree onto a second
   tmpfs (so no host path shows in the sandbox's ``/proc/self/mountinfo``), joins the adapter's
   pids cgroup when there is one, and execs
4. ``bwrap --args 3``: its arguments come from a file, so the sandbox's ``/proc/1/cmdline`` holds no
   host path either. bwrap unshares every namespace (no ``--share-net``), maps the server to uid/gid
   65534, drops every capability, starts a new session, dies with its parent, loads the seccomp filter
   (:mod:`baton.gateway.seccomp`) and executes the server in ``/work`` with a read-only root.

Starting bwrap as host uid 65534 matters: a root-started bwrap with ``--uid 65534`` maps the
sandbox's 65534 back to host root, which can read root's files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from baton.errors import GatewayError
from baton.gateway import cgroups, scratch, seccomp
from baton.gateway.sandbox_spec import SANDBOX_GID, SANDBOX_UID, SANDBOX_WORKDIR, SandboxSpec

if TYPE_CHECKING:
    from baton.gateway.policy import Policy

#: The PATH of processes baton starts on the host (bwrap itself, probes).
HOST_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The PATH inside the sandbox: the host's system directories, then ``/work/bin`` with the console-script
#: launchers of an adapter's wheels (extract.write_console_launchers), last so none can shadow a system
#: command such as the pinned ``python3``.
SANDBOX_PATH = f"{HOST_PATH}:/work/bin"
#: (bwrap, euid) pairs for which a probe sandbox has started in this process.
_VERIFIED: set[tuple[str, int]] = set()
#: Runs in the preparing namespace: ``$1`` stage, ``$2`` tmpfs options, ``$3`` extracted tree,
#: ``$4`` cgroup.procs (or empty: no cgroup), ``$5`` bwrap, then the server's argv (bwrap reads its
#: options from fd 3).
#: With a cgroup it first waits (at most 5 s) until baton has moved it in: its children are born inside.
LAUNCHER = r"""set -eu
stage=$1
if [ -n "$4" ]; then
  n=0
  until grep -qx "$$" "$4"; do
    n=$((n + 1)); [ "$n" -lt 500 ] || { echo "baton: not moved into the pids cgroup" >&2; exit 125; }
    sleep 0.01
  done
fi
mount -t tmpfs -o "$2" baton-tmp "$stage/tmp"
mount -t tmpfs -o nosuid,nodev,mode=0755 baton-work "$stage/work"
cp -R --preserve=mode "$3/." "$stage/work/"
# rw host mounts the policy does not let execute: bound here and remounted noexec,nosuid,nodev, flags
# that no namespace below this one (bwrap's) can lift
if [ -s "$stage/noexec-mounts" ]; then
  while IFS="$(printf '\t')" read -r src dst; do
    mount --bind "$src" "$dst"
    mount -o remount,bind,noexec,nosuid,nodev "$dst"
  done < "$stage/noexec-mounts"
fi
bwrap=$5
shift 5
exec "$bwrap" --args 3 -- "$@" 3<"$stage/bwrap.args" 4<"$stage/seccomp.bpf"
"""


class Sandbox(Protocol):
    """A way to start a process with no network, a read-only root and no privileges."""

    name: str

    def unavailable_reason(self) -> str | None:
        """None when the sandbox can run here, else why not."""

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start ``spec.argv`` in the sandbox with stdin and stdout as pipes."""

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """Remove what the sandbox left behind; True when nothing remains."""


def rlimit_prefix(spec: SandboxSpec, *, nproc: bool = True) -> list[str]:
    """``prlimit`` in front of the sandbox: the limits are set before exec without Python code in the child.

    Memory is RLIMIT_DATA, not RLIMIT_AS: V8 reserves many GiB of PROT_NONE address space for
    WebAssembly, which RLIMIT_AS counts (Node then dies) and RLIMIT_DATA (private writable memory)
    does not. RLIMIT_NPROC is left out (``nproc=False``) when a pids cgroup holds the limit: it counts
    every process of host uid 65534, so it would make all sandboxes share one budget.
    """
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise GatewayError(
            "sandbox_unavailable", "prlimit (util-linux) is needed to set the sandbox's limits."
        )
    return [
        prlimit,
        f"--data={spec.memory_bytes}",
        *([f"--nproc={spec.pids_limit}"] if nproc else []),
        f"--cpu={spec.cpu_seconds}",
        "--core=0",
        "--",
    ]


def as_nobody() -> tuple[int | None, int | None, list[int] | None]:
    """(user, group, extra_groups) for Popen: 65534 when we are root; an unprivileged caller stays itself."""
    if os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID, []
    return None, None, None


APPARMOR_USERNS = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")


def userns_restriction(switch: Path = APPARMOR_USERNS) -> str | None:
    """Ubuntu's AppArmor switch that keeps unprivileged users from creating user namespaces, when on."""
    try:
        value = switch.read_text().strip()
    except OSError:
        return None
    if value == "1":
        return (
            "kernel.apparmor_restrict_unprivileged_userns=1: unprivileged users cannot create user "
            "namespaces unless an AppArmor profile allows bwrap and unshare"
        )
    return None


def _system_binds() -> list[str]:
    """Read-only /usr plus the merged-usr links (or binds), the loader cache and the public CA certificates.

    The CA store is public data that TLS clients refuse to start without (semgrep's core, for one), even
    when the sandbox has no network.
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives", "/etc/ssl/certs"):
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    return args


@dataclass
class Prepared:
    """A bubblewrap start ready to exec: its argv and the staging directory to remove afterwards."""

    argv: list[str]
    stage: Path
    cgroup: cgroups.SandboxCgroups | None = None

    def started(self, pid: int) -> None:
        """The launcher runs as ``pid``: move it into the cgroup (it waits for that before bwrap)."""
        if self.cgroup is not None:
            try:
                self.cgroup.join(pid)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                raise GatewayError(
                    "sandbox_unavailable", f"The sandbox could not be put in its pids cgroup: {exc}."
                ) from None

    def cleanup(self) -> bool:
        """Remove the staging directory and the cgroup; True when both are gone."""
        removed = True
        if self.cgroup is not None:
            removed = self.cgroup.remove()
        shutil.rmtree(self.stage, ignore_errors=True)
        return removed and not self.stage.exists()


class BubblewrapSandbox:
    """bubblewrap, started as host uid 65534, in new user/pid/net/ipc/uts/cgroup namespaces."""

    name = "bubblewrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")
        self.prepared: dict[int, Prepared] = {}

    def unavailable_reason(self) -> str | None:
        """None when a real sandbox (launcher, noexec tmpfs, seccomp) starts here, else why not.

        The probe runs ``true`` through exactly the start path of a server; a success is remembered for
        this process (per bwrap and uid), a failure is probed again next time.
        """
        if self.bwrap is None:
            return "bubblewrap (bwrap) is not installed"
        if shutil.which("unshare") is None or shutil.which("prlimit") is None:
            return "util-linux's unshare and prlimit are needed"
        reason = seccomp.unavailable_reason()
        if reason:
            return f"no seccomp filter can be built, so no sandbox starts: {reason}"
        key = (self.bwrap, os.geteuid())
        if key in _VERIFIED:
            return None
        reason = self._probe()
        if reason is None:
            _VERIFIED.add(key)
        return reason

    def _probe(self) -> str | None:
        workdir = scratch.make("replay")
        workdir.chmod(0o755)
        try:
            prepared = self.prepare(SandboxSpec(workdir=workdir, argv=["true"]), cgroup=False)
            user, group, groups = as_nobody()
            try:
                probe = subprocess.run(
                    prepared.argv, capture_output=True, timeout=20, check=False, env={"PATH": HOST_PATH},
                    user=user, group=group, extra_groups=groups, stdin=subprocess.DEVNULL,
                )  # fmt: skip
            finally:
                prepared.cleanup()
        except (OSError, subprocess.TimeoutExpired, GatewayError) as exc:
            return f"the sandbox could not be started: {exc}"
        finally:
            scratch.remove(workdir)
        if probe.returncode != 0:
            detail = probe.stderr.decode(errors="replace").strip()[:300]
            restricted = userns_restriction()
            return f"bwrap cannot create a sandbox here: {detail}" + (
                f" ({restricted})" if restricted else ""
            )
        return None

    def bwrap_args(self, spec: SandboxSpec, stage: Path) -> list[str]:
        """bwrap's options (read from fd 3): namespaces, mounts, seccomp on fd 4, environment."""
        tmp_path, _ = spec.tmpfs_path_and_size()
        args = [
            "--unshare-user",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_GID),
            "--cap-drop", "ALL",
            "--unshare-all",
            "--new-session",
            "--die-with-parent",
            "--seccomp", "4",
            *_system_binds(),
            "--proc", "/proc",
            "--dev", "/dev",
            "--bind", str(stage / "tmp"), tmp_path,
            "--ro-bind", str(stage / "work"), SANDBOX_WORKDIR,
        ]  # fmt: skip
        for mount in spec.extra_tmpfs:
            args += ["--tmpfs", mount]
        for source, target in spec.extra_ro_binds:
            args += ["--ro-bind", str(source), target]
        for index, host in enumerate(spec.mounts):
            source = stage / f"mount-{index}" if host.noexec else host.host
            args += ["--bind" if host.mode == "rw" else "--ro-bind", str(source), host.sandbox]
        args += ["--remount-ro", "/", "--chdir", SANDBOX_WORKDIR, "--clearenv"]
        env = {"HOME": tmp_path, "CI": "1", "PATH": SANDBOX_PATH, **spec.env}
        for name, value in sorted(env.items()):
            args += ["--setenv", name, value]
        return args

    def prepare(self, spec: SandboxSpec, *, cgroup: bool = True) -> Prepared:
        """Write the staging directory (bwrap's arguments, the BPF program, mount points) and the argv.

        The caller starts ``argv`` and then calls :meth:`Prepared.started` with its pid (``cgroup=False``:
        no pids cgroup, RLIMIT_NPROC instead, for a caller that starts the process out of baton's hands).
        """
        if self.bwrap is None:
            raise GatewayError("sandbox_unavailable", "bubblewrap (bwrap) is not installed.")
        try:
            program = seccomp.filter_bpf()
        except seccomp.SeccompUnavailableError as exc:
            raise GatewayError("sandbox_unavailable", f"No seccomp filter, so no sandbox: {exc}.") from None
        stage = scratch.make("sandbox")
        group: cgroups.SandboxCgroups | None = None
        try:
            for name in ("tmp", "work"):
                (stage / name).mkdir()
            lines = []
            for index, host in enumerate(spec.mounts):
                if host.noexec:  # a mount point of the host path's kind, bound by the launcher
                    point = stage / f"mount-{index}"
                    point.mkdir() if host.host.is_dir() else point.touch()
                    lines.append(f"{host.host}\t{point}\n")
            (stage / "noexec-mounts").write_text("".join(lines), encoding="utf-8")
            args = self.bwrap_args(spec, stage)
            (stage / "bwrap.args").write_bytes(b"".join(arg.encode() + b"\0" for arg in args))
            (stage / "seccomp.bpf").write_bytes(program)
            for item in stage.iterdir():
                item.chmod(0o755 if item.is_dir() else 0o444)
            stage.chmod(0o755)
            group = self._cgroups(spec, stage, cgroup)
            procs = str(group.procs) if group else ""
            argv = [
                *rlimit_prefix(spec, nproc=group is None),
                "unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
                "/bin/sh", "-c", LAUNCHER, "baton-sandbox",
                str(stage), spec.tmpfs_mount_options(), str(spec.workdir), procs, self.bwrap, *spec.argv,
            ]  # fmt: skip
        except BaseException:
            Prepared([], stage, group).cleanup()
            raise
        return Prepared(argv, stage, group)

    @staticmethod
    def _cgroups(spec: SandboxSpec, stage: Path, wanted: bool) -> cgroups.SandboxCgroups | None:
        """The sandbox's cgroups, or None (RLIMIT_NPROC); refuses a ``cpu_limit`` nothing here enforces."""
        cpu = float(spec.cpu_limit) if spec.cpu_limit else None
        group, reason = None, "the caller starts the process itself"
        if wanted:
            try:
                group = cgroups.SandboxCgroups.create(
                    f"baton-{stage.name}", spec.pids_limit, cpu, spec.memory_bytes
                )
                reason = "no pids cgroup can be made here"
            except OSError as exc:
                reason = str(exc)
        if cpu is not None and group is None:
            raise GatewayError(
                "sandbox_limit_unenforceable",
                f"The policy sets cpu_limit = {spec.cpu_limit!r}, which bubblewrap enforces only through a "
                f"cpu cgroup, and none can be used here ({reason}). Remove cpu_limit (cpu_seconds still "
                "bounds the CPU time) or run baton where it can make cgroups.",
            )
        return group

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start the server as host uid 65534 with rlimits, stdin/stdout as pipes."""
        reason = self.unavailable_reason()
        if reason:
            raise GatewayError("sandbox_unavailable", f"The bubblewrap sandbox is unavailable: {reason}.")
        prepared = self.prepare(spec)
        user, group, groups = as_nobody()
        try:
            process = subprocess.Popen(
                prepared.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={"PATH": HOST_PATH},
                close_fds=True,
                user=user,
                group=group,
                extra_groups=groups,
            )
        except OSError as exc:
            prepared.cleanup()
            raise GatewayError("mcp_process_start_failed", f"bwrap could not be started: {exc}.") from None
        self.prepared[process.pid] = prepared
        try:
            prepared.started(process.pid)
        except GatewayError:
            process.wait()
            self.cleanup(process)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
            raise
        return process

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """--die-with-parent and the pid namespace take the whole tree down; the stage goes too."""
        prepared = self.prepared.pop(process.pid, None)
        removed = prepared.cleanup() if prepared is not None else True
        return process.poll() is not None and removed


def enforcement(policy: Policy) -> dict[str, Any]:
    """What the bubblewrap sandbox enforced for ``policy`` on this host (the replay receipt records it)."""
    runtime = policy.runtime
    return {
        "seccomp_denied_syscalls": len(seccomp.DENIED),
        "tmpfs": runtime.tmpfs,
        "tmp_noexec": "noexec" in runtime.tmpfs.partition(":")[2].split(","),
        "pids_limit": runtime.pids_limit,
        "pids_limit_scope": "sandbox" if cgroups.pids_base() else "host_uid",
        "memory_limit": runtime.memory_limit,
        "memory_limit_scope": "process_and_sandbox" if cgroups.base_for("memory") else "process",
        "cpu_seconds_per_process": runtime.cpu_seconds,
        "cpu_limit": runtime.cpu_limit,
        "mounts": [mount.model_dump(exclude_none=True) for mount in runtime.mounts],
    }


def sandbox_report() -> tuple[bool, str]:
    """``baton doctor``'s sandbox line: can a sandbox start, with seccomp, and how far pids_limit reaches."""
    sandbox = BubblewrapSandbox()
    reason = sandbox.unavailable_reason()
    restricted = userns_restriction()
    if reason is not None:
        return False, reason
    user = "host uid 65534" if os.geteuid() == 0 else f"the calling user (uid {os.geteuid()})"
    notes = [
        f"bubblewrap at {sandbox.bwrap}, started as {user}",
        f"seccomp filter of {len(seccomp.DENIED)} denied calls plus clone namespace flags",
        "noexec /tmp enforced",
        f"pids_limit {cgroups.scope()}",
        "memory_limit "
        + (
            "per process and per sandbox (memory cgroup)"
            if cgroups.base_for("memory")
            else "per process only"
        ),
        "cpu_limit "
        + ("enforced (cpu cgroup)" if cgroups.cpu_limit_enforceable() else "refused (no cpu cgroup)"),
    ]
    if restricted:
        notes.append(f"note: {restricted}")
    return True, "; ".join(notes)


def sandbox_for(name: str) -> Sandbox:
    """The sandbox a policy names."""
    if name == "docker":
        from baton.gateway.docker import DockerSandbox

        return DockerSandbox()
    return BubblewrapSandbox()
