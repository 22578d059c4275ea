"""Sandboxes for an external MCP server: bubblewrap (default) and Docker behind one interface.

The bubblewrap sandbox's command line, and why each of its layers exists, is
:mod:`baton.gateway.sandbox.bwrap_command`; Docker's is :mod:`baton.gateway.sandbox.docker`. Here a probe start decides
whether bubblewrap works on this host, a server is started as host uid 65534 (:func:`as_nobody`) and its
staging directory and cgroups are removed after it; what the sandbox enforced goes into the replay receipt
(:func:`enforcement`) and ``baton doctor`` (:func:`sandbox_report`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from baton.errors import GatewayError
from baton.gateway.sandbox import cgroups, scratch, seccomp
from baton.gateway.sandbox.bwrap_command import HOST_PATH, Prepared, prepare
from baton.gateway.sandbox.sandbox_spec import SandboxSpec
from baton.gateway.sandbox.sandbox_spec import as_nobody as as_nobody  # re-exported: its home before landlock

if TYPE_CHECKING:
    from baton.gateway.policy.policy import Policy

#: (bwrap, euid) pairs for which a probe sandbox has started in this process.
_VERIFIED: set[tuple[str, int]] = set()


class Sandbox(Protocol):
    """A way to start a process with no network, a read-only root and no privileges."""

    name: str

    def unavailable_reason(self) -> str | None:
        """None when the sandbox can run here, else why not."""

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start ``spec.argv`` in the sandbox with stdin and stdout as pipes."""

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """Remove what the sandbox left behind; True when nothing remains."""


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
            prepared = prepare(self.bwrap, SandboxSpec(workdir=workdir, argv=["true"]), cgroup=False)
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

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start the server as host uid 65534 with rlimits, stdin/stdout as pipes."""
        reason = self.unavailable_reason()
        if reason:
            raise GatewayError("sandbox_unavailable", f"The bubblewrap sandbox is unavailable: {reason}.")
        prepared = prepare(self.bwrap, spec)
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
        return _fallback_report(reason)
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
    from baton.gateway.sandbox.landlock import abi

    version = abi()
    notes.append(f"Landlock ABI {version} as fallback" if version else "no Landlock fallback")
    return True, "; ".join(notes)


def sandbox_for(name: str) -> Sandbox:
    """The sandbox a policy names; for the default bubblewrap, Landlock when bubblewrap cannot start here
    and Landlock can (the replay receipt records which ran, ``baton doctor`` says which will)."""
    if name == "docker":
        from baton.gateway.sandbox.docker import DockerSandbox

        return DockerSandbox()
    from baton.gateway.sandbox.landlock import LandlockSandbox

    if name == "landlock":
        return LandlockSandbox()
    bubblewrap = BubblewrapSandbox()
    if bubblewrap.unavailable_reason() is None:
        return bubblewrap
    landlock = LandlockSandbox()
    return landlock if landlock.unavailable_reason() is None else bubblewrap


def _fallback_report(bubblewrap: str) -> tuple[bool, str]:
    """``baton doctor``'s line when bubblewrap cannot start: the Landlock sandbox used instead, or both reasons."""
    from baton.gateway.sandbox import landlock

    reason = landlock.LandlockSandbox().unavailable_reason()
    if reason is not None:
        return False, f"{bubblewrap}; the Landlock fallback cannot run either: {reason}"
    return True, f"landlock, because bubblewrap cannot start here ({bubblewrap}); {landlock.report()}"
