"""bubblewrap's command line: the argv of a sandbox start and the staging directory it reads.

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
   (:mod:`baton.gateway.sandbox.seccomp`) and executes the server in ``/work`` with a read-only root.

Starting bwrap as host uid 65534 matters: a root-started bwrap with ``--uid 65534`` maps the
sandbox's 65534 back to host root, which can read root's files.

:class:`baton.gateway.sandbox.sandbox.BubblewrapSandbox` checks that this start works here, runs it and cleans up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from baton.errors import GatewayError
from baton.gateway.sandbox import cgroups, scratch, seccomp
from baton.gateway.sandbox.sandbox_spec import SANDBOX_GID, SANDBOX_UID, SANDBOX_WORKDIR, SandboxSpec

#: The PATH of processes baton starts on the host (bwrap itself, probes).
HOST_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The PATH inside the sandbox: the host's system directories, then ``/work/bin`` with the console-script
#: launchers of an adapter's wheels (wheels.write_console_launchers), last so none can shadow a system
#: command such as the pinned ``python3``.
SANDBOX_PATH = f"{HOST_PATH}:/work/bin"
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


def bwrap_args(spec: SandboxSpec, stage: Path) -> list[str]:
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


def prepare(bwrap: str | None, spec: SandboxSpec, *, cgroup: bool = True) -> Prepared:
    """Write the staging directory (bwrap's arguments, the BPF program, mount points) and the argv.

    ``bwrap`` is the sandbox's bwrap (None: not installed, refused). The caller starts ``argv`` and then
    calls :meth:`Prepared.started` with its pid (``cgroup=False``: no pids cgroup, RLIMIT_NPROC instead,
    for a caller that starts the process out of baton's hands).
    """
    if bwrap is None:
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
        args = bwrap_args(spec, stage)
        (stage / "bwrap.args").write_bytes(b"".join(arg.encode() + b"\0" for arg in args))
        (stage / "seccomp.bpf").write_bytes(program)
        for item in stage.iterdir():
            item.chmod(0o755 if item.is_dir() else 0o444)
        stage.chmod(0o755)
        group = _cgroups(spec, stage, cgroup)
        procs = str(group.procs) if group else ""
        argv = [
            *rlimit_prefix(spec, nproc=group is None),
            "unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", LAUNCHER, "baton-sandbox",
            str(stage), spec.tmpfs_mount_options(), str(spec.workdir), procs, bwrap, *spec.argv,
        ]  # fmt: skip
    except BaseException:
        Prepared([], stage, group).cleanup()
        raise
    return Prepared(argv, stage, group)


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
