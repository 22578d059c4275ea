"""Wake-ups for code that waits on the store: in-process events, and PostgreSQL LISTEN/NOTIFY across replicas.

A writer calls :meth:`Signals.publish` after its transaction commits; a waiter calls :meth:`Signals.wait`
and then re-reads the store. Waiters must still re-check on a short poll (another process on SQLite has
no way to signal), so a lost notification only costs latency, never correctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from baton.store.engine import Store

log = logging.getLogger("baton.store.signals")

CHANNEL = "baton"


class Signals:
    """Topic-keyed wake-ups; cross-process only on PostgreSQL."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._events: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._listener: asyncio.Task[None] | None = None
        self._subscribers: list[tuple[str, Callable[[str], None]]] = []
        self.cross_process = store.engine.dialect.name == "postgresql"

    def publish(self, topic: str) -> None:
        """Wake every local waiter of ``topic`` and, on PostgreSQL, every replica's."""
        self._wake(topic)
        if self.cross_process:
            with self.store.write() as connection:
                connection.execute(
                    text("SELECT pg_notify(:channel, :topic)"), {"channel": CHANNEL, "topic": topic}
                )

    def subscribe(self, prefix: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(topic)`` for every topic starting with ``prefix`` (from any replica)."""
        self._subscribers.append((prefix, callback))

    def _wake(self, topic: str) -> None:
        for event in list(self._events.get(topic, ())):
            event.set()
        for prefix, callback in self._subscribers:
            if topic.startswith(prefix):
                try:
                    callback(topic)
                except Exception:
                    log.warning("signal subscriber failed", exc_info=True)

    async def wait(self, topic: str, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """Wait up to ``timeout`` seconds for ``topic``; True when woken, False on timeout."""
        await self.ensure_listening()
        event = asyncio.Event()
        self._events[topic].add(event)
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self._events[topic].discard(event)
            if not self._events[topic]:
                del self._events[topic]

    async def ensure_listening(self) -> None:
        """Start the LISTEN connection (PostgreSQL only) and wait until it is up."""
        if not self.cross_process:
            return
        if self._listener is None or self._listener.done():
            ready = asyncio.Event()
            self._listener = asyncio.get_running_loop().create_task(self._listen(ready), name="baton-listen")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await ready.wait()

    async def _listen(self, ready: asyncio.Event) -> None:
        """Hold one LISTEN connection; reconnect with backoff if it drops."""
        import psycopg

        delay = 0.2
        while True:
            try:
                dsn = self.store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    ready.set()
                    delay = 0.2
                    async for notification in connection.notifies():
                        self._wake(notification.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("LISTEN connection lost; reconnecting", exc_info=True)
                ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def aclose(self) -> None:
        """Stop listening."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None


def signals_for(runtime: Any) -> Signals:
    """The runtime's shared :class:`Signals` (created on first use)."""
    signals = runtime.services.get("signals")
    if signals is None:
        signals = runtime.services["signals"] = Signals(runtime.store)
    return signals  # type: ignore[no-any-return]
