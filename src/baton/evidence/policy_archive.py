"""Every policy version ever served, content-addressed, so a receipt's pinned hash always finds its text.

``BATON_HOME/gateway/policies/<sha256>.<suffix>``: an adapter's policy document as canonical JSON
(``.json``, its sha256 is the adapter's policy checksum) and its Cedar call policy (``.cedar``, the
``call_policy_sha256`` of each ``gateway_call`` receipt). Written when a version is served, never pruned
(serving snapshots are), and copied into ``baton receipts export`` as ``policies/``, where
``baton receipts verify --replay`` reads them back.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from baton.config import Settings
from baton.store.private import private_tree, write_private

SUFFIXES = ("json", "cedar")
_HEX = re.compile(r"[0-9a-f]{64}")


def archive_dir(settings: Settings) -> Path:
    """``BATON_HOME/gateway/policies``."""
    return settings.home / "gateway" / "policies"


def keep(settings: Settings, data: bytes, suffix: str) -> str:
    """Keep ``data`` under its sha256 (once; the same bytes are never rewritten); returns the hex digest."""
    digest = hashlib.sha256(data).hexdigest()
    directory = archive_dir(settings)
    path = directory / f"{digest}.{suffix}"
    if not path.is_file():
        private_tree(directory, settings.home)
        staging = directory / f".{digest}.{suffix}.tmp"
        write_private(staging, data)
        staging.replace(path)
    return digest


def find(directory: Path, digest: str | None, suffix: str) -> bytes | None:
    """The kept bytes whose sha256 is ``digest`` (``sha256:`` prefix allowed), else None (absent or altered)."""
    hexdigest = (digest or "").removeprefix("sha256:")
    if suffix not in SUFFIXES or not _HEX.fullmatch(hexdigest):
        return None
    try:
        data = (directory / f"{hexdigest}.{suffix}").read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == hexdigest else None
