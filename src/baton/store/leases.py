"""Who owns a piece of running work, and whether that owner is gone.

An owner is ``host:pid:nonce`` (``Runtime.instance_id``). Work held by an owner carries a lease that the
owner renews; the work is orphaned when its lease has expired, or at once when the owner is a process on
this host that no longer exists (so a restart on one machine does not wait for the lease).
"""

from __future__ import annotations

import os
import secrets
import socket
from datetime import datetime, timedelta

from baton import clock

#: How long a lease lasts without renewal, and how often owners renew.
LEASE_SECONDS = 20.0
RENEW_SECONDS = 5.0


def new_instance_id() -> str:
    """A process-unique owner name."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def lease_until(seconds: float = LEASE_SECONDS) -> str:
    """The ISO time a lease taken now expires."""
    return (clock.now() + timedelta(seconds=seconds)).isoformat()


def owner_is_gone(owner: str | None, lease_expires_at: str | None, *, me: str) -> bool:
    """Whether work held by ``owner`` is orphaned (never true for ``me``)."""
    if owner == me:
        return False
    if owner is None or lease_expires_at is None:
        return True
    if datetime.fromisoformat(lease_expires_at) <= clock.now():
        return True
    return not process_alive(owner)


def owner_pid(owner: str) -> int | None:
    """The pid in an owner name, or None when it has none."""
    pid_text = owner.split(":")[1] if owner.count(":") >= 1 else ""
    return int(pid_text) if pid_text.isdigit() else None


def process_alive(owner: str) -> bool:
    """For an owner on this host, whether its process exists; an owner on another host counts as alive."""
    host = owner.partition(":")[0]
    pid = owner_pid(owner)
    if host != socket.gethostname() or pid is None:
        return True
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
