"""Wake-ups: in-process on every database, across processes (replicas) on PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from baton.store.engine import Store
from baton.store.signals import CHANNEL, Signals

pytestmark = pytest.mark.anyio


async def registered(signals: Signals, topic: str) -> None:
    """Wait until a waiter of ``topic`` has registered (a condition, not a sleep)."""
    async with asyncio.timeout(300):
        while topic not in signals._events:
            await asyncio.sleep(0.01)


async def listening(store: Store) -> None:
    """Wait until the server shows a session that ran ``LISTEN`` on baton's channel."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = :listen"
    )
    async with asyncio.timeout(300):
        while True:
            with store.engine.connect() as connection:
                if connection.execute(query, {"listen": f"LISTEN {CHANNEL}"}).scalar():
                    return
            await asyncio.sleep(0.02)


async def test_a_local_publish_wakes_only_its_topic(tmp_path) -> None:
    signals = Signals(Store(f"sqlite:///{tmp_path / 's.db'}"))
    woken = asyncio.create_task(signals.wait("hitl:a", timeout=3600))
    other = asyncio.create_task(signals.wait("hitl:b", timeout=3600))
    await registered(signals, "hitl:a")
    await registered(signals, "hitl:b")
    signals.publish("hitl:a")
    assert await woken is True
    for _ in range(10):  # a wrongly set event would let the other waiter finish within these turns
        await asyncio.sleep(0)
    assert not other.done()
    other.cancel()


async def test_a_publish_on_one_replica_wakes_a_waiter_on_another(postgres_server, tmp_path) -> None:
    url = postgres_server.url
    replica_a, replica_b = Signals(Store(url)), Signals(Store(url))
    try:
        waiter = asyncio.create_task(replica_a.wait("hitl:x", timeout=30))
        await registered(replica_a, "hitl:x")  # after ensure_listening: the LISTEN ran...
        await listening(replica_b.store)  # ...and the server shows it
        replica_b.publish("hitl:x")
        assert await waiter is True
    finally:
        await replica_a.aclose()
        await replica_b.aclose()
        replica_a.store.dispose()
        replica_b.store.dispose()
