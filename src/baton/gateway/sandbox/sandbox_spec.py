"""What a sandbox runs and with which limits: :class:`SandboxSpec`, host mounts, the sandbox user.

Shared by every sandbox (:mod:`baton.gateway.sandbox.sandbox` for bubblewrap, :mod:`baton.gateway.sandbox.docker`), so that
the Docker sandbox needs nothing of the bubblewrap module and imports run one way.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SANDBOX_UID = 65534
SANDBOX_GID = 65534
SANDBOX_WORKDIR = "/work"
SIZE = re.compile(r"size=([0-9]+)([kmg]?)")


@dataclass(frozen=True)
class HostMount:
    """A host path bound into the sandbox (``rw`` or ``ro``), validated by the policy."""

    host: Path
    sandbox: str
    mode: Literal["ro", "rw"] = "ro"
    #: An ``rw`` mount is ``noexec,nosuid,nodev`` unless the policy says ``exec = true`` for it.
    exec: bool = False

    @property
    def noexec(self) -> bool:
        """Whether the launcher binds it ``noexec,nosuid,nodev`` before bwrap sees it."""
        return self.mode == "rw" and not self.exec


@dataclass(frozen=True)
class SandboxSpec:
    """What to run and with which limits; ``workdir`` is copied read-only to /work."""

    workdir: Path
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 2 << 30
    memory_limit: str = "2g"
    pids_limit: int = 256
    cpu_seconds: int = 120
    #: A share of CPUs (e.g. "0.5"): a cpu cgroup under bubblewrap, --cpus under docker; None: no cap.
    cpu_limit: str | None = None
    tmpfs: str = "/tmp:rw,noexec,nosuid,size=64m"  # noqa: S108 -- the sandbox's own tmpfs
    shutdown_timeout_seconds: int = 5
    image: str | None = None
    platform: str = "linux/amd64"
    extra_ro_binds: tuple[tuple[Path, str], ...] = ()
    #: Further tmpfs mounts (a browser's /dev/shm), after /dev.
    extra_tmpfs: tuple[str, ...] = ()
    mounts: tuple[HostMount, ...] = ()

    def tmpfs_path_and_size(self) -> tuple[str, int | None]:
        """The tmpfs mount point and its size in bytes (when the spec states one)."""
        path, _, options = self.tmpfs.partition(":")
        match = SIZE.search(options)
        if not match:
            return path, None
        return path, int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]

    def tmpfs_mount_options(self) -> str:
        """``mount -o`` options for the tmpfs: the policy's, with nosuid and nodev always added."""
        _, _, options = self.tmpfs.partition(":")
        wanted = [o for o in options.split(",") if o and o not in ("rw", "nosuid", "nodev")]
        return ",".join(["nosuid", "nodev", "mode=1777", *wanted])


def as_nobody() -> tuple[int | None, int | None, list[int] | None]:
    """(user, group, extra_groups) for Popen: 65534 when we are root; an unprivileged caller stays itself."""
    if os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID, []
    return None, None, None
