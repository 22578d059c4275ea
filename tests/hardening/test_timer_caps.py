"""Timer caps over a real stdio server: active-timer cap, minimum intervals per action, spawn rate."""

from __future__ import annotations

import anyio
import pytest

from tests.conftest import call, stdio_session
from tests.test_timers_stdio import until_fired

pytestmark = pytest.mark.anyio

RECORD = {"kind": "record"}
SPAWN = {"kind": "spawn_subagent", "task": "Say hi.", "role": "assistant"}


async def test_fast_repeating_timers_with_side_effects_are_refused(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        spawn = await call(session, "mcp_set_timer", {"name": "s", "interval_seconds": 0.1, "action": SPAWN})
        assert spawn["error_class"] == "timer_schedule_invalid"
        assert spawn["reason"] == "interval_below_minimum" and spawn["minimum_seconds"] == 60
        notify = {"kind": "notify", "channel": "slack", "message": "m"}
        fast = await call(session, "mcp_set_timer", {"name": "n", "interval_seconds": 5, "action": notify})
        assert fast["reason"] == "interval_below_minimum" and fast["minimum_seconds"] == 10
        ok = await call(session, "mcp_set_timer", {"name": "s", "interval_seconds": 60, "action": SPAWN})
        assert ok["success"] is True, ok
        record = await call(
            session, "mcp_set_timer", {"name": "r", "interval_seconds": 0.5, "action": RECORD}
        )
        assert record["success"] is True
        assert (await call(session, "mcp_list_subagents"))["count"] == 0


async def test_the_number_of_active_timers_is_capped(baton_env: dict[str, str]) -> None:
    async with stdio_session({**baton_env, "BATON_TIMER_MAX_ACTIVE": "3"}) as session:
        ids = []
        for n in range(3):
            timer = await call(
                session, "mcp_set_timer", {"name": f"t{n}", "delay_seconds": 3600, "action": RECORD}
            )
            ids.append(timer["timer_id"])
        refused = await call(
            session, "mcp_set_timer", {"name": "t3", "delay_seconds": 3600, "action": RECORD}
        )
        assert refused["error_class"] == "timer_limit_reached"
        assert refused["reason"] == "active_timers" and refused["limit"] == 3
        assert (await call(session, "mcp_cancel_timer", {"timer_id": ids[0]}))["success"] is True
        again = await call(session, "mcp_set_timer", {"name": "t3", "delay_seconds": 3600, "action": RECORD})
        assert again["success"] is True
        assert len((await call(session, "mcp_list_timers", {"status": "active"}))["timers"]) == 3


async def test_timer_spawns_are_rate_limited(model_env: dict[str, str]) -> None:
    env = {**model_env, "BATON_TIMER_SPAWNS_PER_HOUR": "2"}
    async with stdio_session(env) as session:
        timers = [
            (await call(session, "mcp_set_timer", {"name": f"s{n}", "delay_seconds": 0.1, "action": SPAWN}))[
                "timer_id"
            ]
            for n in range(3)
        ]
        outcomes = [(await until_fired(session, timer_id))["last_firing"] for timer_id in timers]
        assert sorted(o["outcome"] for o in outcomes) == ["failed", "succeeded", "succeeded"], outcomes
        (failed,) = [o for o in outcomes if o["outcome"] == "failed"]
        assert failed["error_class"] == "timer_limit_reached"
        listed = await call(session, "mcp_list_subagents")
        assert listed["count"] == 2


async def test_list_timers_pages_and_says_when_truncated(baton_env: dict[str, str]) -> None:
    async with stdio_session(baton_env) as session:
        made = [
            (
                await call(
                    session, "mcp_set_timer", {"name": f"t{n}", "delay_seconds": 3600, "action": RECORD}
                )
            )["timer_id"]
            for n in range(5)
        ]
        seen: list[str] = []
        arguments: dict[str, object] = {"limit": 2}
        while True:
            page = await call(session, "mcp_list_timers", arguments)
            seen += [timer["timer_id"] for timer in page["timers"]]
            if not page["truncated"]:
                assert page["next_cursor"] is None
                break
            arguments = {"limit": 2, "cursor": page["next_cursor"]}
        assert seen == made
        everything = await call(session, "mcp_list_timers")
        assert everything["count"] == 5 and everything["truncated"] is False


async def test_a_requests_escalation_steps_never_count_against_the_active_timer_cap(
    baton_env: dict[str, str],
) -> None:
    """The steps are timers in the store, but the cap is the agent's own timers' (docs/hitl.md)."""
    from tests.cli_process import run_cli
    from tests.hitl.helpers import pending_requests

    async with stdio_session({**baton_env, "BATON_TIMER_MAX_ACTIVE": "1"}) as session:
        asked: list[dict[str, object]] = []

        async def ask() -> None:
            arguments = {"request_message": "Rotate?", "timeout_seconds": 3600, "escalation": "3000:slack"}
            asked.append(await call(session, "mcp_request_admin_approval", arguments))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            (request,) = await pending_requests(session)
            timer = await call(
                session, "mcp_set_timer", {"name": "own", "delay_seconds": 3600, "action": RECORD}
            )
            done = run_cli(baton_env, "hitl", "reject", request["request_id"])
            assert done.returncode == 0, done.stderr
    assert timer["success"] is True, timer
    assert asked[0]["decision"] == "rejected"
