"""A cache of the built-in tools' definitions, so ``tools/list`` need not wait for the store.

Every client lists tools right after ``initialize``, but the full registry needs SQLAlchemy, the store
and every tool module. The built-in definitions depend only on baton's own code (and the SDK that
renders them), so once a server has built them they are written to ``BATON_HOME/cache/tools.json``
under a fingerprint of that code: the path, size and modification time of every module of the
installed ``baton`` package, with the ``mcp`` and Python versions. A later start whose fingerprint
matches answers the first ``tools/list`` from the file while the registry loads; any change to the
code (an upgrade, an edit) changes the fingerprint and the cache is simply not used.

Only the built-in tools are cached. The gateway's proxied tools come from adapter state in the store,
so the cache is used only when there can be none: a store in this ``BATON_HOME`` (no
``BATON_DATABASE_URL``) with no adapter ever locked in it (``BATON_HOME/gateway`` empty).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("baton.wire.server")

CACHE_NAME = "tools.json"


def fingerprint() -> str:
    """A digest of the installed baton code and of the SDK that renders a tool definition."""
    import mcp
    import mcp_types

    files = sorted(_modules(str(Path(__file__).resolve().parents[1])))
    files += [module.__file__ or "" for module in (mcp, mcp_types)]
    digest = hashlib.sha256(sys.version.encode())
    for path in files:
        stat = os.stat(path)
        digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _modules(directory: str) -> Iterator[str]:
    """Every ``*.py`` file under ``directory`` (``os.scandir``: a start-up path, half the cost of ``rglob``)."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(".py") and entry.is_file():
                yield entry.path
            elif entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                yield from _modules(entry.path)


def cache_path(home: Path) -> Path:
    """Where the cache of a ``BATON_HOME`` lives."""
    return home / "cache" / CACHE_NAME


def usable(home: Path, database_url: str | None) -> bool:
    """Whether the built-in tools are the whole listing: a local store and no adapter ever locked."""
    if database_url:
        return False
    gateway = home / "gateway"
    try:
        return not any(gateway.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False


def load(home: Path) -> list[dict[str, Any]] | None:
    """The cached definitions when their fingerprint matches this code, else None."""
    try:
        cached = json.loads(cache_path(home).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(cached, dict) or cached.get("fingerprint") != fingerprint():
        return None
    tools = cached.get("tools")
    return tools if isinstance(tools, list) else None


def store(home: Path, tools: list[dict[str, Any]]) -> None:
    """Write the definitions atomically (0600) under this code's fingerprint; failures only log."""
    path = cache_path(home)
    document = json.dumps({"fingerprint": fingerprint(), "tools": tools}, ensure_ascii=False).encode()
    try:
        if path.exists() and path.read_bytes() == document:
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(document)
        os.replace(temporary, path)
    except OSError:
        log.debug("tool cache not written", exc_info=True)
