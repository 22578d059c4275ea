"""Host directories given to a server: checked against this host at every start, then bound by the sandbox.

The policy validates the paths' shape (absolute, normalized, no system tree, no sandbox directory);
this module checks what only the host can tell: the path exists, it is the path itself and not a
symlink to somewhere else, it is not ``BATON_HOME``, inside it or one of its parents, and a ``rw``
mount is writable by the user the sandbox writes as (host uid 65534 when baton runs as root; the
calling user otherwise). A mount that uid cannot write is refused rather than silently read-only.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from baton.errors import GatewayError
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_runtime import MOUNT_SYSTEM_TREES, Mount
from baton.gateway.sandbox.sandbox_spec import SANDBOX_GID, SANDBOX_UID, HostMount


def _invalid(mount: Mount, reason: str) -> GatewayError:
    return GatewayError(
        "adapter_mount_invalid",
        f"The mount {mount.host} -> {mount.sandbox} is refused: {reason}.",
        host=mount.host,
        sandbox=mount.sandbox,
    )


def _writable_by_sandbox(path: Path) -> bool:
    """Whether the user the sandbox writes as may create files in ``path`` (or write it, for a file)."""
    if os.geteuid() != 0:
        return os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0))
    info = path.stat()
    bits = 0o3 if path.is_dir() else 0o2  # write (+ search for a directory), as "other"
    if info.st_uid == SANDBOX_UID:
        shift = 6
    elif info.st_gid == SANDBOX_GID:
        shift = 3
    else:
        shift = 0
    return (info.st_mode >> shift) & bits == bits


def _unreachable_parent(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that the sandbox's user may not search, or None."""
    for parent in reversed(path.parents):
        if os.geteuid() != 0:
            if not os.access(parent, os.X_OK):
                return parent
            continue
        info = parent.stat()
        shift = 6 if info.st_uid == SANDBOX_UID else 3 if info.st_gid == SANDBOX_GID else 0
        if not (info.st_mode >> shift) & 0o1:
            return parent
    return None


def check_mount(mount: Mount, home: Path) -> HostMount:
    """The mount as the sandbox binds it, after the host-side checks; raises a typed refusal."""
    host = Path(mount.host)
    if not host.exists():
        raise _invalid(mount, "the host path does not exist")
    real = PurePosixPath(os.path.realpath(host))
    if real != PurePosixPath(mount.host):
        raise _invalid(mount, f"the host path is or passes through a symlink (to {real})")
    home_real = PurePosixPath(os.path.realpath(home))
    if real == home_real or real in home_real.parents or home_real in real.parents:
        raise _invalid(mount, "it is BATON_HOME, inside it, or one of its parents")
    for tree in map(PurePosixPath, MOUNT_SYSTEM_TREES):
        if real == tree or tree in real.parents:
            raise _invalid(mount, f"it lies in the system tree {tree}")
    unreachable = _unreachable_parent(host)
    if unreachable is not None:
        raise _invalid(mount, f"the sandbox's user cannot enter {unreachable}")
    if mount.mode == "rw" and not _writable_by_sandbox(host):
        raise GatewayError(
            "adapter_mount_not_writable",
            f"The rw mount {mount.host} is not writable by the sandbox's user "
            f"({'host uid 65534' if os.geteuid() == 0 else 'the calling user'}); "
            "give that user write access (e.g. chown 65534:65534) or mount it ro.",
            host=mount.host,
        )
    return HostMount(Path(real), mount.sandbox, mount.mode, exec=bool(mount.exec))


def host_mounts(policy: Policy, home: Path) -> tuple[HostMount, ...]:
    """Every mount of ``policy``, checked against this host."""
    return tuple(check_mount(mount, home) for mount in policy.runtime.mounts)
