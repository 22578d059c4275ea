"""Wake-ups: in-process on every database, across processes (replicas) on PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from baton.signals import Signals
from baton.store import Store

pytestmark = pytest.mark.anyio


async def test_a_local_publish_wakes_only_its_topic(tmp_path) -> None:
    signals = Signals(Store(f"sqlite:///{tmp_path / 's.db'}"))
    woken = asyncio.create_task(signals.wait("hitl:a", timeout=5))
    other = asyncio.create_task(signals.wait("hitl:b", timeout=0.3))
    await asyncio.sleep(0.01)
    signals.publish("hitl:a")
    assert await woken is True
    assert await other is False


async def test_a_publish_on_one_replica_wakes_a_waiter_on_another(postgres_server, tmp_path) -> None:
    url = postgres_server.url
    replica_a, replica_b = Signals(Store(url)), Signals(Store(url))
    try:
        waiter = asyncio.create_task(replica_a.wait("hitl:x", timeout=10))
        await asyncio.sleep(0.3)  # the LISTEN connection is up before publishing
        replica_b.publish("hitl:x")
        assert await waiter is True
    finally:
        await replica_a.aclose()
        await replica_b.aclose()
        replica_a.store.dispose()
        replica_b.store.dispose()
