"""The gateway's temporary directories: named after the process that owns them, swept when it is gone.

Every failure path removes what it made (``finally``). A baton process that is killed outright
(SIGKILL, a client that gives up on shutdown) cannot; the next gateway start in any baton process
removes those leftovers: a ``baton-{kind}-{pid}-…`` directory whose pid no longer runs, and the
pids cgroup of such a sandbox.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from baton.store.leases import pid_alive

KINDS = ("sandbox", "upstream", "replay", "egress")
NAME = re.compile(r"^baton-(sandbox|upstream|replay|egress)-([0-9]+)-")


def make(kind: str) -> Path:
    """A fresh 0700 directory ``baton-{kind}-{pid}-…`` in the temp dir."""
    assert kind in KINDS
    return Path(tempfile.mkdtemp(prefix=f"baton-{kind}-{os.getpid()}-"))


def remove(path: Path) -> None:
    """Remove a tree, making read-only directories writable first."""
    for item in [path, *path.rglob("*")]:
        if item.is_dir() and not item.is_symlink():
            with contextlib.suppress(OSError):
                item.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


def sweep() -> list[str]:
    """Remove the leftovers of dead baton processes; returns their names."""
    from baton.gateway.sandbox.cgroups import SandboxCgroups, base_for

    removed = []
    directory = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for path in directory.iterdir():
            match = NAME.match(path.name)
            if match is None or pid_alive(int(match.group(2))) or not path.is_dir():
                continue
            remove(path)
            removed.append(path.name)
    for controller in ("pids", "cpu", "memory"):
        base = base_for(controller)
        if base is None:
            continue
        with contextlib.suppress(OSError):
            for group in base.glob("baton-baton-sandbox-*"):
                match = NAME.match(group.name.removeprefix("baton-"))
                if match is not None and not pid_alive(int(match.group(2))):
                    SandboxCgroups(group).remove()
                    removed.append(group.name)
    return removed
