"""Inbox login hygiene: failed logins throttled per client address, and sessions revoked by logout.

* :class:`LoginThrottle`: failed authentication from one address on any route (the login form, a bearer
  token on ``/inbox*``, ``/mcp`` or ``/metrics``; counted by :class:`baton.http.guards.AuthThrottle`).
  The first ``BATON_LOGIN_MAX_FAILURES`` failures from one address are free;
  each further one locks the address out for twice as long as the last (1 s, 2 s, 4 s … from
  ``BATON_LOGIN_LOCKOUT_FIRST_SECONDS``, up to
  ``BATON_LOGIN_LOCKOUT_MAX_SECONDS``). While locked, every attempt, even with the right token, is
  answered 429 ``http_rate_limited`` with ``Retry-After`` and not checked. A success clears the address.
  Kept in memory per server process (a restart forgets it; the token's strength is the real defence).
* :func:`revoke_session` / :func:`session_revoked`: logout writes the session id to the store, so the
  cookie is dead on every replica until it would have expired anyway.
"""

from __future__ import annotations

import math
import threading

from sqlalchemy import Connection, delete, insert, select

from baton import clock
from baton.runtime import Runtime
from baton.store.recent import RecentMap
from baton.store.schema import hitl_session_revocations

#: Addresses remembered at most (the oldest are forgotten first).
MAX_TRACKED_ADDRESSES = 4096


class LoginThrottle:
    """Failed-login counters per client address, with exponential lockout."""

    def __init__(
        self, free_failures: int, max_lockout_seconds: float, first_lockout_seconds: float = 1.0
    ) -> None:
        self.free_failures = free_failures
        self.max_lockout_seconds = max_lockout_seconds
        self.first_lockout_seconds = first_lockout_seconds
        self._entries: RecentMap[str, tuple[int, float]] = RecentMap(MAX_TRACKED_ADDRESSES)
        self._lock = threading.Lock()

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> LoginThrottle:
        """The runtime's throttle (one per server process)."""
        throttle = runtime.services.get("inbox_login_throttle")
        if not isinstance(throttle, LoginThrottle):
            settings = runtime.settings
            throttle = cls(
                settings.baton_login_max_failures,
                settings.baton_login_lockout_max_seconds,
                settings.baton_login_lockout_first_seconds,
            )
            runtime.services["inbox_login_throttle"] = throttle
        return throttle

    def retry_after(self, address: str, now: float | None = None) -> int:
        """Seconds until ``address`` may try again (0: now)."""
        now = clock.monotonic() if now is None else now
        with self._lock:
            _failures, locked_until = self._entries.get(address, (0, 0.0))
        return max(0, math.ceil(locked_until - now))

    def failed(self, address: str, now: float | None = None) -> None:
        """Count one failure; past the free ones, lock the address out."""
        now = clock.monotonic() if now is None else now
        with self._lock:
            failures, _locked_until = self._entries.pop(address, (0, 0.0))
            failures += 1
            over = failures - self.free_failures
            lockout = min(self.max_lockout_seconds, self.first_lockout_seconds * 2.0 ** (over - 1))
            locked_until = now + lockout if over > 0 else 0.0
            self._entries[address] = (failures, locked_until)

    def succeeded(self, address: str) -> None:
        """Forget the address's failures."""
        with self._lock:
            self._entries.pop(address, None)


def _key(sid: str) -> str:
    """The random part of a session id (a person's session prefixes it with their encoded name)."""
    return sid.rsplit("~", 1)[-1]


def revoke_session(runtime: Runtime, sid: str, expires_epoch: int) -> None:
    """Record that session ``sid`` ended (and forget revocations whose cookies expired anyway)."""
    from baton.evidence.canonical import iso

    now = clock.time()
    sid = _key(sid)
    with runtime.store.write() as connection:
        connection.execute(
            delete(hitl_session_revocations).where(hitl_session_revocations.c.expires_epoch < now)
        )
        if not session_revoked_in(connection, sid):
            connection.execute(
                insert(hitl_session_revocations).values(
                    sid=sid, expires_epoch=float(expires_epoch), revoked_at=iso(now)
                )
            )


def session_revoked(runtime: Runtime, sid: str) -> bool:
    """Whether a logout ended session ``sid``."""
    with runtime.store.read() as connection:
        return session_revoked_in(connection, sid)


def session_revoked_in(connection: Connection, sid: str) -> bool:
    """:func:`session_revoked` inside an open connection."""
    query = select(hitl_session_revocations.c.sid).where(hitl_session_revocations.c.sid == _key(sid))
    return connection.execute(query).first() is not None
