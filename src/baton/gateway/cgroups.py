"""A pids cgroup per sandbox, so ``pids_limit`` holds per adapter and not per host uid.

RLIMIT_NPROC counts every process of a uid: in a user namespace it is charged at each level, so all
sandboxes (host uid 65534) would share one budget. A cgroup's ``pids.max`` counts exactly the
processes inside it. baton creates one when it can (it runs as root and a test cgroup can be made under
its own, with cgroup v1's pids hierarchy or a cgroup v2 tree whose ``subtree_control`` enables pids).
baton moves the sandbox's launcher into it right after starting it, and the launcher waits until it
is inside before it starts bwrap, so every process of the sandbox is born inside. Otherwise the limit
is RLIMIT_NPROC alone (see :func:`scope`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


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


@lru_cache(maxsize=1)
def pids_base() -> Path | None:
    """The directory under which baton may create pids cgroups (a test cgroup was made there), or None."""
    if os.geteuid() != 0:
        return None
    for base in _candidates():
        probe = base / f"baton-probe-{os.getpid()}"
        try:
            probe.mkdir()
            ok = (probe / "pids.max").exists()
            probe.rmdir()
        except OSError:
            continue
        if ok:
            return base
    return None


def _candidates() -> list[Path]:
    """pids-capable cgroup directories of this process, v1 first."""
    found = []
    own = _own_paths()
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and "pids" in options.split(","):
            for controllers, path in own.items():
                if "pids" in controllers.split(","):
                    found.append(Path(point) / path.lstrip("/"))
        if fstype == "cgroup2" and "" in own:
            base = Path(point) / own[""].lstrip("/")
            with contextlib.suppress(OSError):
                if "pids" in (base / "cgroup.subtree_control").read_text().split():
                    found.append(base)
    return found


def scope() -> str:
    """How far ``pids_limit`` reaches on this host, in words (``baton doctor``, the replay receipt)."""
    if pids_base() is not None:
        return "per sandbox (a pids cgroup each)"
    return "RLIMIT_NPROC: shared by every sandbox of the same host uid (no writable pids cgroup here)"


@dataclass
class PidsCgroup:
    """One sandbox's pids cgroup."""

    path: Path

    @classmethod
    def create(cls, name: str, limit: int) -> PidsCgroup | None:
        """Make the cgroup with ``pids.max = limit``; None when impossible."""
        base = pids_base()
        if base is None:
            return None
        path = base / name
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @property
    def procs(self) -> Path:
        """The cgroup's process list (the launcher waits to see itself in it)."""
        return self.path / "cgroup.procs"

    def join(self, pid: int) -> None:
        """Move ``pid`` (the launcher, before it starts bwrap) into the cgroup."""
        self.procs.write_text(str(pid))

    def pids(self) -> list[int]:
        """The processes still inside."""
        try:
            return [int(pid) for pid in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> bool:
        """Kill whatever is left inside and remove the cgroup; True when it is gone."""
        for _ in range(100):
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.02)  # the killed processes are still being reaped
        return False
