"""Two `baton serve --http --stateless` replicas on one PostgreSQL: state and wake-ups cross replicas."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing import Behavior, FakeLLMServer
from baton.timers.service import TimerService
from tests.conftest import FAKE_MOONSHOT_KEY
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def replica_env(baton_env: dict[str, str], postgres_server: Any, fake_llm: FakeLLMServer) -> dict[str, str]:
    import uuid

    import psycopg

    name = f"r_{uuid.uuid4().hex[:10]}"
    dsn = f"host=127.0.0.1 port={postgres_server.port} user=baton dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return {
        **baton_env,
        "BATON_DATABASE_URL": f"postgresql+asyncpg://baton@127.0.0.1:{postgres_server.port}/{name}",
        "BATON_HTTP_STATELESS": "true",
        "BATON_HITL_ALLOW_MCP_DECISIONS": "1",
        "COLLAB_PROVIDER": "moonshot",
        "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY,
        "OPENAI_BASE_URL": fake_llm.base_url,
    }


async def structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_an_approval_waiting_on_a_is_decided_through_b(
    replica_env: dict[str, str], tmp_path: Path
) -> None:
    port_a, port_b = free_port(), free_port()
    with (
        http_server(replica_env, f"127.0.0.1:{port_a}", tmp_path),
        http_server(replica_env, f"127.0.0.1:{port_b}", tmp_path),
    ):
        async with (
            Client(f"http://127.0.0.1:{port_a}/mcp") as a,
            Client(f"http://127.0.0.1:{port_b}/mcp") as b,
        ):
            outcome: dict[str, Any] = {}

            async def wait_on_a() -> None:
                outcome.update(
                    await structured(
                        a,
                        "mcp_request_admin_approval",
                        {"request_message": "ship it?", "timeout_seconds": 3600},
                    )
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wait_on_a)
                with anyio.fail_after(300):
                    while not (pending := await structured(b, "mcp_list_pending_requests", {}))["requests"]:
                        await anyio.sleep(0.05)
                request_id = pending["requests"][0]["request_id"]
                decided = await structured(
                    b,
                    "mcp_respond_to_request",
                    {"request_id": request_id, "approved": True, "admin_notes": "from replica B"},
                )
                assert decided["success"] is True
            assert outcome["approved"] is True
            assert outcome["request_id"] == request_id
            assert outcome["admin_notes"] == "from replica B"


async def test_a_killed_replicas_subagent_is_failed_by_the_other(
    replica_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.default = Behavior(delay_seconds=60)
    port_a, port_b = free_port(), free_port()
    with http_server(replica_env, f"127.0.0.1:{port_b}", tmp_path):
        with http_server(replica_env, f"127.0.0.1:{port_a}", tmp_path) as replica_a:
            async with Client(f"http://127.0.0.1:{port_a}/mcp") as a:
                spawned = await structured(a, "mcp_spawn_subagent", {"task": "long", "mode": "async"})
            with anyio.fail_after(300):
                while not fake_llm.requests:
                    await anyio.sleep(0.05)
            os.kill(replica_a.pid, signal.SIGKILL)
            replica_a.wait(timeout=300)
        async with Client(f"http://127.0.0.1:{port_b}/mcp") as b:
            with anyio.fail_after(300):
                while (
                    status := await structured(
                        b, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]}
                    )
                )["status"] == "running":
                    await anyio.sleep(0.2)
    assert status["status"] == "failed"
    assert status["error_class"] == "interrupted_by_restart"


async def test_a_timer_fires_once_across_replicas(replica_env: dict[str, str], tmp_path: Path) -> None:
    """Each due time is fired once: counted from the receipts after both replicas have stopped, so no
    later firing can still come (no waiting window)."""
    port_a, port_b = free_port(), free_port()
    with (
        http_server(replica_env, f"127.0.0.1:{port_a}", tmp_path),
        http_server(replica_env, f"127.0.0.1:{port_b}", tmp_path),
    ):
        async with (
            Client(f"http://127.0.0.1:{port_a}/mcp") as a,
            Client(f"http://127.0.0.1:{port_b}/mcp") as b,
        ):
            once = await structured(
                a, "mcp_set_timer", {"name": "once", "delay_seconds": 1, "action": {"kind": "record"}}
            )
            every = await structured(
                b, "mcp_set_timer", {"name": "every", "interval_seconds": 0.2, "action": {"kind": "record"}}
            )
            with anyio.fail_after(300):
                while True:
                    rows = {t["timer_id"]: t for t in (await structured(a, "mcp_list_timers", {}))["timers"]}
                    if rows[once["timer_id"]]["fire_count"] and rows[every["timer_id"]]["fire_count"] >= 10:
                        break
                    await anyio.sleep(0.1)
            assert (await structured(a, "mcp_cancel_timer", {"timer_id": every["timer_id"]}))["success"]
    runtime = Runtime.open(load_settings(replica_env))
    try:
        fired = [r.payload for r in runtime.receipts.list(kind="timer_fired", limit=100_000)]
        final = {t["timer_id"]: t for t in TimerService(runtime).list()}
    finally:
        runtime.close()
    assert [f["timer_id"] for f in fired].count(once["timer_id"]) == 1
    shared = [f for f in fired if f["timer_id"] == every["timer_id"]]
    assert len(shared) == final[every["timer_id"]]["fire_count"]
    assert len({f["due_at"] for f in shared}) == len(shared)
    assert sorted(f["sequence"] for f in shared) == list(range(1, len(shared) + 1))


async def test_escalation_steps_fire_once_across_replicas_and_a_decision_cancels_the_rest(
    replica_env: dict[str, str], tmp_path: Path
) -> None:
    """Both replicas scan the store for due steps; each step is claimed once (counted after both stopped).
    The decision through B cancels the step not yet due, in its own transaction."""
    from baton.testing.webhooks import WebhookReceiver

    with WebhookReceiver() as receiver:
        env = {**replica_env, "HITL_WEBHOOK_URL": receiver.url("/hitl"), "BATON_WEBHOOK_ALLOW": "127.0.0.0/8"}
        port_a, port_b = free_port(), free_port()
        with (
            http_server(env, f"127.0.0.1:{port_a}", tmp_path),
            http_server(env, f"127.0.0.1:{port_b}", tmp_path),
        ):
            async with (
                Client(f"http://127.0.0.1:{port_a}/mcp") as a,
                Client(f"http://127.0.0.1:{port_b}/mcp") as b,
            ):
                outcome: dict[str, Any] = {}
                args = {
                    "request_message": "escalate across replicas?",
                    "timeout_seconds": 3600,
                    "escalation": "1:webhook,1:webhook,2:webhook,3000:webhook",
                }

                async def wait_on_a() -> None:
                    outcome.update(await structured(a, "mcp_request_admin_approval", args))

                async with anyio.create_task_group() as group:
                    group.start_soon(wait_on_a)
                    with anyio.fail_after(300):
                        while (
                            len([r for r in receiver.requests if r.json.get("event") == "hitl_escalation"])
                            < 3
                        ):
                            await anyio.sleep(0.05)
                    request_id = (await structured(b, "mcp_list_pending_requests", {}))["requests"][0][
                        "request_id"
                    ]
                    decided = await structured(
                        b, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
                    )
                    assert decided["success"] is True
                assert outcome["approved"] is True
    runtime = Runtime.open(load_settings(env))
    try:
        fired = [r.payload for r in runtime.receipts.list(kind="hitl_escalated", limit=100_000)]
        steps = {t["name"]: t for t in TimerService(runtime).list()}
    finally:
        runtime.close()
    assert sorted(f["step"] for f in fired) == [1, 2, 3]
    assert all(f["request_id"] == request_id and f["delivered"] for f in fired)
    statuses = {name.removeprefix(f"{request_id} "): timer["status"] for name, timer in steps.items()}
    assert statuses == {
        "escalation 1": "completed",
        "escalation 2": "completed",
        "escalation 3": "completed",
        "escalation 4": "cancelled",
    }
    assert len([r for r in receiver.requests if r.json.get("event") == "hitl_escalation"]) == 3
