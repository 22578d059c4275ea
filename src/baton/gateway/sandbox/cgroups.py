"""Cgroups per sandbox: ``pids_limit`` per adapter (not per host uid), and ``cpu_limit`` at all.

RLIMIT_NPROC counts every process of a uid: in a user namespace it is charged at each level, so all
sandboxes (host uid 65534) would share one budget. A cgroup's ``pids.max`` counts exactly the
processes inside it; ``cpu.cfs_quota_us`` (v1) or ``cpu.max`` (v2) caps the CPU share, which no rlimit
can. baton creates them when it can (it runs as root and a test cgroup can be made under its own,
with cgroup v1 hierarchies or a cgroup v2 tree whose ``subtree_control`` enables the controller).
baton moves the sandbox's launcher in right after starting it, and the launcher waits until it is
in the pids cgroup (joined last) before it starts bwrap, so every process of the sandbox is born
inside. Without a pids cgroup the process limit is RLIMIT_NPROC (see :func:`scope`); without a cpu
cgroup a policy's ``cpu_limit`` cannot be enforced and the sandbox refuses to start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

#: The file that proves a controller is active in a cgroup directory.
MARKERS = {
    "pids": "pids.max",
    "cpu": ("cpu.max", "cpu.cfs_quota_us"),
    "memory": ("memory.max", "memory.limit_in_bytes"),
}
CFS_PERIOD_US = 100_000


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype, _, options = [*right.split(" "), "", "", ""][:3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((left.split(" ")[4], fstype, options))
    return found


def _own_paths() -> dict[str, str]:
    """controller list (``pids``, or ``""`` for v2) → this process's cgroup path."""
    paths = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            paths[controllers] = path
    return paths


def _candidates(controller: str) -> list[Path]:
    """Cgroup directories of this process where ``controller`` is available, v1 first."""
    found = []
    own = _own_paths()
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and controller in options.split(","):
            for controllers, path in own.items():
                if controller in controllers.split(","):
                    found.append(Path(point) / path.lstrip("/"))
        if fstype == "cgroup2" and "" in own:
            base = Path(point) / own[""].lstrip("/")
            with contextlib.suppress(OSError):
                if controller in (base / "cgroup.subtree_control").read_text().split():
                    found.append(base)
    return found


def _has_marker(directory: Path, controller: str) -> bool:
    markers = MARKERS[controller]
    return any((directory / name).exists() for name in ((markers,) if isinstance(markers, str) else markers))


@lru_cache(maxsize=4)
def base_for(controller: str) -> Path | None:
    """Where baton may create ``controller`` cgroups (a test cgroup was made there), or None."""
    if os.geteuid() != 0:
        return None
    for base in _candidates(controller):
        probe = base / f"baton-probe-{os.getpid()}"
        try:
            probe.mkdir()
            ok = _has_marker(probe, controller)
            probe.rmdir()
        except OSError:
            continue
        if ok:
            return base
    return None


def pids_base() -> Path | None:
    """Where baton may create pids cgroups, or None."""
    return base_for("pids")


def scope() -> str:
    """How far ``pids_limit`` reaches on this host, in words (``baton doctor``)."""
    if pids_base() is not None:
        return "per sandbox (a pids cgroup each)"
    return "RLIMIT_NPROC: shared by every sandbox of the same host uid (no writable pids cgroup here)"


def cpu_limit_enforceable() -> bool:
    """Whether a sandbox's ``cpu_limit`` can be enforced here (a cpu cgroup can be made)."""
    return base_for("cpu") is not None


@dataclass
class SandboxCgroups:
    """One sandbox's cgroup directories (one per v1 hierarchy; v2 shares one directory)."""

    pids: Path
    others: list[Path] = field(default_factory=list)

    @classmethod
    def create(
        cls, name: str, pids_limit: int, cpu_limit: float | None = None, memory_bytes: int | None = None
    ) -> SandboxCgroups | None:
        """Make the cgroups with their limits; None when no pids cgroup can be made.

        Raises OSError when ``cpu_limit`` is asked for and cannot be set (the caller refuses to start).
        The memory cgroup is best effort: RLIMIT_DATA bounds each process in any case.
        """
        base = pids_base()
        if base is None:
            return None
        made = cls(base / name)
        try:
            made.pids.mkdir()
            (made.pids / "pids.max").write_text(str(pids_limit))
            if cpu_limit is not None:
                made._limit_cpu(name, cpu_limit)
        except OSError:
            made.remove()
            raise
        if memory_bytes is not None:
            with contextlib.suppress(OSError):
                made._limit_memory(name, memory_bytes)
        return made

    def _directory(self, controller: str, name: str) -> Path:
        """The cgroup directory of ``controller`` (made when it is another hierarchy than pids')."""
        base = base_for(controller)
        if base is None:
            raise OSError(f"no {controller} cgroup can be made here")
        directory = base / name
        if directory != self.pids and directory not in self.others:
            directory.mkdir()
            self.others.append(directory)
        return directory

    def _limit_memory(self, name: str, memory_bytes: int) -> None:
        directory = self._directory("memory", name)
        target = "memory.max" if (directory / "memory.max").exists() else "memory.limit_in_bytes"
        (directory / target).write_text(str(memory_bytes))

    def directory_of(self, controller: str) -> Path | None:
        """This sandbox's cgroup directory for ``controller`` (pids, cpu, memory), when it has one."""
        return next((d for d in [self.pids, *self.others] if _has_marker(d, controller)), None)

    def _limit_cpu(self, name: str, cpu_limit: float) -> None:
        directory = self._directory("cpu", name)
        quota = max(1000, int(cpu_limit * CFS_PERIOD_US))
        if (directory / "cpu.max").exists():
            (directory / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
        else:
            (directory / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (directory / "cpu.cfs_quota_us").write_text(str(quota))

    @property
    def procs(self) -> Path:
        """The pids cgroup's process list (the launcher waits to see itself in it)."""
        return self.pids / "cgroup.procs"

    def join(self, pid: int) -> None:
        """Move ``pid`` (the launcher, before it starts bwrap) into every cgroup, the pids one last."""
        for directory in [*self.others, self.pids]:
            (directory / "cgroup.procs").write_text(str(pid))

    def remaining(self) -> list[int]:
        """The processes still inside."""
        try:
            return [int(pid) for pid in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> bool:
        """Kill whatever is left inside and remove the cgroups; True when they are gone."""
        gone = True
        for directory in [self.pids, *self.others]:
            gone = _remove(directory, self.remaining if directory == self.pids else list) and gone
        return gone


#: How long a cgroup's last processes may take to be killed and reaped before removal gives up; on a
#: loaded machine a pid namespace's members can take seconds to be reaped after its init dies.
REMOVE_DEADLINE_SECONDS = 10.0


def _remove(directory: Path, remaining: Callable[[], list[int]]) -> bool:
    deadline = time.monotonic() + REMOVE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        for pid in remaining():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)  # the killed processes are still being reaped
    return False
