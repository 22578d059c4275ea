"""Timer tools through the official MCP client over stdio: real `baton serve` processes, restarts and
two servers sharing one store."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing import FakeLLMServer
from baton.timers.service import TimerRequest, TimerService
from tests.cli_process import run_cli
from tests.conftest import call, stdio_session

pytestmark = pytest.mark.anyio

RECORD = {"kind": "record"}


def fired_receipts(env: dict[str, str]) -> list[dict[str, Any]]:
    """The payloads of every ``timer_fired`` receipt, read with ``baton receipts list --json``."""
    done = run_cli(env, "receipts", "list", "--oldest", "--kind", "timer_fired", "--limit", "10000", "--json")
    assert done.returncode == 0, done.stderr
    return [row["payload"] for row in json.loads(done.stdout)]


async def timers_by_id(session: Any) -> dict[str, dict[str, Any]]:
    listed = await call(session, "mcp_list_timers")
    assert listed["success"] is True, listed
    return {t["timer_id"]: t for t in listed["timers"]}


async def until_fired(session: Any, timer_id: str, count: int = 1, seconds: float = 300) -> dict[str, Any]:
    """Poll mcp_list_timers until the timer fired ``count`` times and the last outcome is recorded (the
    guard only stops a hang: a loaded machine may take long)."""
    with anyio.fail_after(seconds):
        while True:
            timer = (await timers_by_id(session))[timer_id]
            last = timer["last_firing"]
            if timer["fire_count"] >= count and last and last["outcome"] != "running":
                return timer
            await anyio.sleep(0.05)


async def test_tools_set_fire_list_cancel_and_refuse_bad_input(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    mirror = tmp_path / "state" / "timers.json"
    env = {**baton_env, "TIMER_STORAGE_PATH": str(mirror)}
    async with stdio_session(env) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"mcp_set_timer", "mcp_list_timers", "mcp_cancel_timer"} <= names

        soon = await call(session, "mcp_set_timer", {"name": "soon", "delay_seconds": 0.3, "action": RECORD})
        assert soon["success"] is True and soon["timer_id"].startswith("tm_"), soon
        assert datetime.fromisoformat(soon["next_fire_at"]) > datetime.now(UTC)
        later = await call(
            session, "mcp_set_timer", {"name": "later", "interval_seconds": 3600, "action": RECORD}
        )
        fired = await until_fired(session, soon["timer_id"])
        assert fired["status"] == "completed" and fired["last_firing"]["outcome"] == "succeeded"
        assert fired["last_firing"]["missed"] is False

        past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
        bad = {
            "timer_schedule_invalid": [
                {"name": "p", "fire_at": past, "action": RECORD},
                {"name": "n", "delay_seconds": -3, "action": RECORD},
                {"name": "z", "fire_at": "2999-01-01T09:00:00", "action": RECORD},
                {"name": "two", "delay_seconds": 5, "fire_at": "2999-01-01T09:00:00Z", "action": RECORD},
            ],
            "timer_action_invalid": [
                {"name": "u", "delay_seconds": 5, "action": {"kind": "launch_missiles"}},
                {"name": "m", "delay_seconds": 5, "action": {"kind": "notify", "message": "no channel"}},
            ],
            "invalid_arguments": [{"name": "a", "delay_seconds": 5}],
        }
        for error_class, cases in bad.items():
            for arguments in cases:
                result = await call(session, "mcp_set_timer", arguments)
                assert result["success"] is False and result["error_class"] == error_class, (
                    arguments,
                    result,
                )
                assert result["error"]

        unknown = await call(session, "mcp_cancel_timer", {"timer_id": "tm_missing"})
        assert unknown["error_class"] == "timer_not_found"
        completed = await call(session, "mcp_cancel_timer", {"timer_id": soon["timer_id"]})
        assert completed["error_class"] == "timer_already_completed"

        listed = run_cli(env, "timers", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert {t["timer_id"] for t in json.loads(listed.stdout)} == {soon["timer_id"], later["timer_id"]}
        by_cli = run_cli(env, "timers", "cancel", later["timer_id"])
        assert by_cli.returncode == 0, by_cli.stderr
        assert json.loads(by_cli.stdout)["status"] == "cancelled"
        again = await call(session, "mcp_cancel_timer", {"timer_id": later["timer_id"]})
        assert again["success"] is False and again["error_class"] == "timer_already_cancelled"
        assert (await timers_by_id(session))[later["timer_id"]]["status"] == "cancelled"
        twice = run_cli(env, "timers", "cancel", later["timer_id"])
        assert twice.returncode == 1 and "timer_already_cancelled" in twice.stderr

    assert [p.name for p in mirror.parent.iterdir()] == ["timers.json"]
    document = json.loads(mirror.read_text())
    states = {t["id"]: t["status"] for t in document["timers"]}
    assert states == {soon["timer_id"]: "completed", later["timer_id"]: "cancelled"}


async def test_a_timer_due_while_the_server_was_down_fires_at_start_marked_missed(
    baton_env: dict[str, str],
) -> None:
    # the timers are set in the store while no server runs, so none can fire before it is "down"
    runtime = Runtime.open(load_settings(baton_env))
    try:
        service = TimerService(runtime)
        # set as the agent the server below serves: an agent lists only its own timers
        once = service.set(TimerRequest(name="once", action=RECORD, delay_seconds=1.0, agent="ops"))
        every = service.set(TimerRequest(name="every", action=RECORD, interval_seconds=1.0, agent="ops"))
    finally:
        runtime.close()
    # wait until both are overdue, the interval by more than one repetition
    overdue = datetime.fromisoformat(every["next_fire_at"]) + timedelta(seconds=1.3)
    await anyio.sleep(max((overdue - datetime.now(UTC)).total_seconds(), 0))
    assert fired_receipts(baton_env) == []

    async with stdio_session({**baton_env, "BATON_AGENT_NAME": "ops"}) as session:
        await until_fired(session, once["timer_id"])
        await until_fired(session, every["timer_id"], count=2)
    receipts = fired_receipts(baton_env)
    (missed_once,) = [r for r in receipts if r["timer_id"] == once["timer_id"]]
    assert missed_once["missed"] is True and missed_once["outcome"] == "succeeded"
    first, second, *_ = [r for r in receipts if r["timer_id"] == every["timer_id"]]
    assert first["missed"] is True and first["skipped"] >= 1
    assert first["due_at"] == every["next_fire_at"]
    assert second["missed"] is False and second["due_at"] == first["next_fire_at"]
    grid = (
        datetime.fromisoformat(second["due_at"]) - datetime.fromisoformat(first["due_at"])
    ).total_seconds()
    assert grid == pytest.approx(1.0 * (first["skipped"] + 1), abs=1e-3)


async def test_the_timer_mirror_never_holds_a_secret(baton_env: dict[str, str], tmp_path: Path) -> None:
    """TIMER_STORAGE_PATH is a file on disk: credential shapes are redacted in it, and so is a value that only
    became a configured secret after the timer was stored (the mirror is rewritten redacted at start)."""
    mirror = tmp_path / "state" / "timers.json"
    env = {**baton_env, "TIMER_STORAGE_PATH": str(mirror)}
    later_secret = "hunter2-correct-horse-battery"
    shaped = "ghp-" + "A1b2C3d4E5f6G7h8I9j0"
    action = {"kind": "notify", "channel": "webhook", "message": f"rotate {later_secret} and {shaped}"}
    async with stdio_session(env) as session:
        timer = await call(
            session, "mcp_set_timer", {"name": "rotate", "delay_seconds": 3600, "action": action}
        )
        assert timer["success"] is True, timer
    assert shaped not in mirror.read_text()
    async with stdio_session({**env, "SMTP_PASSWORD": later_secret}) as session:
        assert timer["timer_id"] in {
            t["timer_id"] for t in (await call(session, "mcp_list_timers"))["timers"]
        }
    text = mirror.read_text()
    assert timer["timer_id"] in text and "rotate" in text
    assert later_secret not in text and shaped not in text
    assert "[REDACTED]" in text


async def test_two_servers_on_one_store_fire_each_due_time_once(baton_env: dict[str, str]) -> None:
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(stdio_session(baton_env))
        second = await stack.enter_async_context(stdio_session(baton_env))
        every = await call(
            first, "mcp_set_timer", {"name": "shared", "interval_seconds": 0.2, "action": RECORD}
        )
        once = await call(second, "mcp_set_timer", {"name": "single", "delay_seconds": 0.5, "action": RECORD})
        # long enough for both servers to have re-scanned the store several times
        await until_fired(second, every["timer_id"], count=12)
        await until_fired(first, once["timer_id"])
        assert (await call(second, "mcp_cancel_timer", {"timer_id": every["timer_id"]}))["success"]
        count = (await timers_by_id(first))[every["timer_id"]]["fire_count"]
    receipts = fired_receipts(baton_env)
    shared = [r for r in receipts if r["timer_id"] == every["timer_id"]]
    assert len(shared) == count
    assert len({r["due_at"] for r in shared}) == len(shared)
    assert sorted(r["sequence"] for r in shared) == list(range(1, count + 1))
    assert len([r for r in receipts if r["timer_id"] == once["timer_id"]]) == 1


async def test_a_spawn_subagent_timer_starts_an_async_subagent(
    model_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    action = {"kind": "spawn_subagent", "task": "Say whether 17 is prime.", "role": "math specialist"}
    async with stdio_session(model_env) as session:
        timer = await call(
            session, "mcp_set_timer", {"name": "spawn", "delay_seconds": 0.2, "action": action}
        )
        assert timer["success"] is True, timer
        fired = await until_fired(session, timer["timer_id"])
        assert fired["last_firing"]["outcome"] == "succeeded", fired
        (receipt,) = [r for r in fired_receipts(model_env) if r["timer_id"] == timer["timer_id"]]
        subagent_id = receipt["detail"]["subagent_id"]
        with anyio.fail_after(300):
            while (status := await call(session, "mcp_get_subagent_status", {"subagent_id": subagent_id}))[
                "status"
            ] not in {"completed", "failed"}:
                await anyio.sleep(0.05)
        assert status["status"] == "completed", status
    # the firing acted as the agent that set the timer: the subagent is that agent's (it could read it)
    assert status["agent"] == receipt["agent"] == timer["agent"] == "stdio:mcp"
    assert "Say whether 17 is prime." in fake_llm.all_request_text()


async def test_only_an_active_timer_fires_whatever_else_the_store_holds(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """A cancelled or completed timer that still carries a due time (a mirror written by hand or by another
    version) never fires, and a one-shot timer fires once. The mirror is adopted at start; the marker is due
    after every other timer, and timers are claimed in due order, so once it fired the others were due."""
    mirror = tmp_path / "timers.json"
    env = {**baton_env, "TIMER_STORAGE_PATH": str(mirror)}
    now = datetime.now(UTC)

    def at(minutes: float) -> str:
        return (now - timedelta(minutes=minutes)).isoformat()

    def entry(timer_id: str, status: str, due: str, **changes: Any) -> dict[str, Any]:
        return {
            "id": timer_id,
            "name": timer_id,
            "schedule": "once",
            "interval_seconds": None,
            "action": RECORD,
            "status": status,
            "first_fire_at": due,
            "next_fire_at": due,
            "created_at": at(60),
            "updated_at": at(60),
            "agent": "stdio:mcp",  # the official client's claim: the stdio agent that lists them
            **changes,
        }

    stale = {
        "tm_cancelled": entry("tm_cancelled", "cancelled", at(5), cancelled_at=at(30)),
        "tm_cancelled_every": entry(
            "tm_cancelled_every", "cancelled", at(4), schedule="interval", interval_seconds=60
        ),
        "tm_completed": entry("tm_completed", "completed", at(3), fire_count=1),
    }
    marker = entry("tm_marker", "active", at(1))
    mirror.write_text(json.dumps({"version": 1, "timers": [*stale.values(), marker]}))
    async with stdio_session(env) as session:
        fired = await until_fired(session, "tm_marker")
        assert fired["status"] == "completed" and fired["next_fire_at"] is None
        # a second one-shot, due after the first fired: once it fired, the first had every chance again
        later = await call(
            session, "mcp_set_timer", {"name": "later", "delay_seconds": 0.1, "action": RECORD}
        )
        await until_fired(session, later["timer_id"])
        listed = await timers_by_id(session)
    for timer_id, stored in stale.items():
        assert listed[timer_id]["status"] == stored["status"], listed[timer_id]
        assert listed[timer_id]["fire_count"] == stored.get("fire_count", 0), listed[timer_id]
    assert listed["tm_marker"]["fire_count"] == 1
    by_timer = [r["timer_id"] for r in fired_receipts(env)]
    assert sorted(by_timer) == sorted(["tm_marker", later["timer_id"]])


async def test_a_timer_stored_before_a_cap_repeats_no_faster_than_the_cap_allows(
    baton_env: dict[str, str],
) -> None:
    """A timer set every second while the minimum was lower is served by a process whose minimum is an
    hour: its next due time is on an hourly grid from the one that fired, never a second later."""
    runtime = Runtime.open(load_settings(baton_env))
    try:
        every = TimerService(runtime).set(
            TimerRequest(name="every", action=RECORD, interval_seconds=1.0, agent="ops")
        )
    finally:
        runtime.close()
    capped = {**baton_env, "BATON_AGENT_NAME": "ops", "BATON_TIMER_MIN_INTERVAL_SECONDS": "3600"}
    async with stdio_session(capped) as session:
        fired = await until_fired(session, every["timer_id"])
    (receipt,) = [r for r in fired_receipts(baton_env) if r["timer_id"] == every["timer_id"]]
    period = datetime.fromisoformat(fired["next_fire_at"]) - datetime.fromisoformat(receipt["due_at"])
    assert period.total_seconds() == pytest.approx(3600 * (receipt["skipped"] + 1), abs=1e-3), receipt
    assert fired["fire_count"] == 1 and fired["status"] == "active"
