"""Data at rest is private: baton's home is 0700, and every database, key, mirror, campaign bundle and gateway
file it writes is 0600 in 0700 directories.

Kept free of heavy imports: settings, the store and the mirrors use it before anything else is loaded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("baton.store.private")

DIR_MODE = 0o700
FILE_MODE = 0o600
#: SQLite's companions of a database file; SQLite gives them the database file's own mode when it creates
#: them, so a 0600 database gets 0600 companions, and companions left by an older baton are tightened here.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) as 0700; tighten it when it exists, is ours and is looser.

    A directory owned by someone else is left alone with a warning: baton cannot chmod it, and the
    operator who chose it should know that others may read what baton writes there.
    """
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)  # a file in the way raises, as before
        os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask; say it exactly
        return path
    info = path.stat()
    if stat.S_IMODE(info.st_mode) & 0o077:
        if info.st_uid == os.getuid():
            os.chmod(path, DIR_MODE)
        else:
            log.warning("%s is not owned by this user and is readable by others; baton leaves it as is", path)
    return path


def private_tree(path: Path, root: Path) -> Path:
    """Create ``path`` and each missing directory between ``root`` (excluded) and it at 0700, tightening ours."""
    chain = [path, *path.parents]
    below_root = chain[: chain.index(root)] if root in chain else [path]
    for directory in reversed(below_root):
        private_dir(directory)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` at 0600 (an existing file is tightened before it is rewritten)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def private_file(path: Path) -> None:
    """Make an existing file 0600 (nothing when it does not exist)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    if stat.S_IMODE(info.st_mode) != FILE_MODE:
        os.chmod(path, FILE_MODE)


def create_private_file(path: Path) -> None:
    """Create ``path`` empty at 0600 unless it exists, then make sure it is 0600."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    private_file(path)


def private_sqlite(database: Path) -> None:
    """Before SQLite opens ``database``: create it 0600 and tighten any companion files left behind."""
    database.parent.mkdir(parents=True, exist_ok=True)
    create_private_file(database)
    for suffix in SQLITE_COMPANIONS:
        private_file(database.with_name(database.name + suffix))


def append_private(path: Path, text: str, *, sync: bool = False) -> None:
    """Append ``text`` (UTF-8) to ``path``, creating it 0600; an existing file is tightened first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
