"""The JSON mirror of the timers at ``TIMER_STORAGE_PATH``: an atomically rewritten copy of the store.

The store is the source of truth; the mirror is rewritten from the store after every change, under a
lock file (in ``BATON_HOME``) so that the last writer always writes the latest committed state.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from baton.private import private_dir
from baton.receipts import utc_now

MIRROR_VERSION = 1


@contextlib.contextmanager
def locked(path: Path, lock_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock for the mirror at ``path`` (a file in ``lock_dir``, not beside the mirror)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    private_dir(lock_dir)  # BATON_HOME/locks: 0700, its lock files 0600
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    fd = os.open(lock_dir / f"timers-mirror-{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write(path: Path, timers: list[dict[str, Any]]) -> None:
    """Replace the mirror with ``timers`` atomically (temp file in the same directory, fsync, rename)."""
    document = {"version": MIRROR_VERSION, "written_at": utc_now(), "timers": timers}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read(path: Path) -> list[dict[str, Any]]:
    """The timers listed in the mirror, or nothing when it is absent or unreadable."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    timers = document.get("timers") if isinstance(document, dict) else None
    return [t for t in timers if isinstance(t, dict)] if isinstance(timers, list) else []
