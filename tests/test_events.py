"""The draft MCP Events extension (``BATON_EXPERIMENTAL_EVENTS=1``) through real ``baton serve`` processes and
the official client: ``events/list``, ``events/stream`` (push) and ``events/poll``, each agent seeing only
the events of what it owns, a decision made by ``baton hitl approve`` in another process included."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from pydantic import ConfigDict

from tests.cli_process import run_cli
from tests.conftest import call
from tests.hitl.helpers import HttpServer, pending_requests

pytestmark = pytest.mark.anyio

APPROVE = {"request_message": "Ship it", "timeout_seconds": 3600}


class Occurrence(types.NotificationParams):
    """A ``notifications/events/*`` message's params, kept whole."""

    model_config = ConfigDict(extra="allow")


class Events(ClientExtension):
    """Keeps the ``notifications/events/*`` a client received, in order (the official client has no events
    runtime; its extension API binds the draft's notification methods)."""

    identifier = "org.example/events-test-client"

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [
            NotificationBinding(
                method=f"notifications/events/{kind}", params_type=Occurrence, handler=self.keeper(kind)
            )
            for kind in ("active", "event", "heartbeat", "error", "terminated")
        ]

    def keeper(self, kind: str) -> Any:
        async def keep(params: Occurrence) -> None:
            kept = params.model_dump(by_alias=True, exclude_none=True) | dict(params.model_extra or {})
            self.received.append((f"notifications/events/{kind}", kept))

        return keep

    def of(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.received if name == method]

    async def until(self, count: int) -> list[dict[str, Any]]:
        """The first ``count`` events, once they arrived."""
        with anyio.fail_after(300):  # only stops a hang
            while len(self.of("notifications/events/event")) < count:
                await anyio.sleep(0.05)
        return self.of("notifications/events/event")[:count]


class Answer(types.Result):
    """An events method's result, kept whole."""

    model_config = ConfigDict(extra="allow")


async def request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One events method through the official client's session."""
    sent = types.Request[dict[str, Any], str](method=method, params=params)
    result = await client.session.send_request(sent, Answer)
    return dict(result.model_dump(by_alias=True, exclude_none=True)) | dict(result.model_extra or {})


@asynccontextmanager
async def stdio(env: dict[str, str], events: Events | None = None, *flags: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve", *flags], env=env)
    async with Client(params, extensions=[events] if events else []) as client:
        yield client


async def test_without_the_flag_there_is_no_events_capability_and_no_events_method(
    baton_env: dict[str, str],
) -> None:
    async with stdio(baton_env) as client:
        capabilities = client.server_capabilities
        refusals = []
        for method in ("events/list", "events/stream", "events/poll"):
            with pytest.raises(MCPError) as refused:
                await request(client, method, {"name": "timer.fired"})
            refusals.append(refused.value.error.code)
    assert refusals == [-32601] * 3
    assert "events" not in (capabilities.experimental or {})


async def test_an_agent_is_pushed_only_its_own_decisions_even_those_made_by_the_cli_in_another_process(
    baton_env: dict[str, str],
) -> None:
    env = baton_env
    alice_events, bob_events = Events(), Events()
    async with (  # the setting for one, the flag for the other
        stdio({**env, "BATON_AGENT_NAME": "alice", "BATON_EXPERIMENTAL_EVENTS": "1"}, alice_events) as alice,
        stdio({**env, "BATON_AGENT_NAME": "bob"}, bob_events, "--experimental-events") as bob,
        anyio.create_task_group() as group,
    ):
        assert (alice.server_capabilities.experimental or {}).get("events") == {"listChanged": False}
        listed = await request(alice, "events/list", {})
        start = await request(alice, "events/poll", {"name": "hitl.request_decided", "cursor": None})
        for client in (alice, bob):
            group.start_soon(request, client, "events/stream", {"name": "hitl.request_decided"})
        group.start_soon(call, bob, "mcp_request_admin_approval", APPROVE)
        [bobs] = await pending_requests(bob)
        group.start_soon(call, alice, "mcp_request_admin_approval", APPROVE)
        [alices] = await pending_requests(alice)
        for request_id in (bobs["request_id"], alices["request_id"]):  # bob's first: alice must skip it
            decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "approve", request_id)
            assert decided.returncode == 0, decided.stderr
        [to_alice] = await alice_events.until(1)
        [to_bob] = await bob_events.until(1)
        polled = await request(
            alice, "events/poll", {"name": "hitl.request_decided", "cursor": start["cursor"]}
        )
        aged = await request(
            alice, "events/poll", {"name": "hitl.request_decided", "cursor": "0", "maxAgeMs": 0}
        )
        refusals = []
        for params in (
            {"name": "email.received"},
            {"name": "timer.fired", "arguments": {"requestId": "hr_x"}},
            {"name": "timer.fired", "cursor": "999999"},
        ):
            with pytest.raises(MCPError) as refused:
                await request(alice, "events/poll", params)
            refusals.append(refused.value.error.code)
        group.cancel_scope.cancel()
    assert refusals == [-32011, -32602, -32602]
    assert aged["events"] == [] and aged["truncated"] is True  # the age floor skipped past cursor 0
    assert [event["name"] for event in listed["events"]] == [
        "hitl.request_decided",
        "timer.fired",
        "subagent.finished",
    ]
    assert all(event["delivery"] == ["push", "poll"] for event in listed["events"])
    assert to_alice["data"]["requestId"] == alices["request_id"] and to_alice["data"]["status"] == "approved"
    assert to_bob["data"]["requestId"] == bobs["request_id"]
    [active] = alice_events.of("notifications/events/active")
    assert active["truncated"] is False and active["_meta"][SUBSCRIPTION_ID_META_KEY] is not None
    assert to_alice["_meta"] == active["_meta"]
    assert [event["data"]["requestId"] for event in polled["events"]] == [alices["request_id"]]
    assert polled["hasMore"] is False and int(polled["cursor"]) >= int(to_alice["cursor"])


async def test_a_timer_firing_and_a_subagent_finishing_reach_their_agent_over_streamable_http(
    model_env: dict[str, str], tmp_path: Path
) -> None:
    server = HttpServer({**model_env, "BATON_EXPERIMENTAL_EVENTS": "1"}, tmp_path / "server.log")
    timers, subagents = Events(), Events()
    try:
        async with (
            Client(f"{server.base_url}/mcp", extensions=[timers]) as first,
            Client(f"{server.base_url}/mcp", extensions=[subagents]) as second,
            anyio.create_task_group() as group,
        ):
            group.start_soon(request, first, "events/stream", {"name": "timer.fired"})
            group.start_soon(request, second, "events/stream", {"name": "subagent.finished"})
            with anyio.fail_after(300):
                while not (
                    timers.of("notifications/events/active") and subagents.of("notifications/events/active")
                ):
                    await anyio.sleep(0.05)
            timer = await call(
                first, "mcp_set_timer", {"name": "nudge", "delay_seconds": 0.1, "action": {"kind": "record"}}
            )
            spawned = await call(second, "mcp_spawn_subagent", {"task": "Say hi.", "mode": "async"})
            [fired] = await timers.until(1)
            [finished] = await subagents.until(1)
            group.cancel_scope.cancel()
    finally:
        server.stop()
    assert fired["name"] == "timer.fired" and fired["data"]["timerId"] == timer["timer_id"]
    assert fired["data"]["outcome"] == "succeeded"
    assert finished["data"] == {
        "subagentId": spawned["subagent_id"],
        "status": "completed",
        "errorClass": None,
    }
