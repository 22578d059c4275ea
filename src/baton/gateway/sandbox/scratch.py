"""The gateway's temporary directories: named after the process that owns them, swept when it is gone.

They live in baton's own directory of the temp dir, ``baton-UID`` (0711: the sandbox's user can pass
through to a tree it is given, but not list it), each named ``baton-{kind}-{pid}-…``. Every failure path
removes what it made (``finally``). A baton process that is killed outright (SIGKILL, a lock interrupted
while npm fills its cache, a client that gives up on shutdown) cannot; the next lock, replay or ``baton
serve`` start in any baton process removes those leftovers: a directory whose pid no longer runs, and the
pids cgroup of such a sandbox.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from baton.store.leases import pid_alive

KINDS = ("sandbox", "upstream", "replay", "egress", "npm-lock", "uv-lock", "wheels")
NAME = re.compile(r"^baton-(sandbox|upstream|replay|egress|npm-lock|uv-lock|wheels)-([0-9]+)-")


def base() -> Path:
    """``baton-UID`` in the temp dir, made 0711 if need be; the temp dir itself if that name is not ours."""
    temp = Path(tempfile.gettempdir())
    owned = temp / f"baton-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        owned.mkdir(mode=0o711)
    try:
        info = owned.lstat()
    except OSError:
        return temp
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return temp  # another user's name, or a link: never write through it
    return owned


def make(kind: str) -> Path:
    """A fresh 0700 directory ``baton-{kind}-{pid}-…`` in baton's own temp directory."""
    assert kind in KINDS
    return Path(tempfile.mkdtemp(prefix=f"baton-{kind}-{os.getpid()}-", dir=base()))


@contextlib.contextmanager
def directory(kind: str) -> Iterator[Path]:
    """A scratch directory for the length of a ``with`` block (what ``TemporaryDirectory`` does, swept)."""
    path = make(kind)
    try:
        yield path
    finally:
        remove(path)


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
    for place in dict.fromkeys([base(), Path(tempfile.gettempdir())]):  # and where older versions put them
        with contextlib.suppress(OSError):
            for path in place.iterdir():
                match = NAME.match(path.name)
                if match is None or pid_alive(int(match.group(2))) or not path.is_dir() or path.is_symlink():
                    continue
                remove(path)
                removed.append(path.name)
    for controller in ("pids", "cpu", "memory"):
        parent = base_for(controller)
        if parent is None:
            continue
        with contextlib.suppress(OSError):
            for group in parent.glob("baton-baton-sandbox-*"):
                match = NAME.match(group.name.removeprefix("baton-"))
                if match is not None and not pid_alive(int(match.group(2))):
                    SandboxCgroups(group).remove()
                    removed.append(group.name)
    return removed
