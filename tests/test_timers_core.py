"""The timer core in process: validation, firing, intervals, cancel, claims, actions and the mirror."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.config import Settings, load_settings
from baton.errors import BatonError, NotificationError
from baton.notify.service import Notifier
from baton.runtime import Runtime
from baton.testing.webhooks import WebhookReceiver
from baton.timers import mirror
from baton.timers.schedule import format_time, next_after, now_utc
from baton.timers.scheduler import Scheduler
from baton.timers.service import TimerRequest, TimerService
from tests.notify_support import DELIVERY, SLACK_PATH

RECORD = {"kind": "record"}


@pytest.fixture
def runtime(tmp_path: Path, database_url: str) -> Iterator[Runtime]:
    """A runtime on SQLite and on PostgreSQL (the timer store behaves the same on both)."""
    rt = Runtime.open(
        Settings(
            baton_home=tmp_path / "home",
            baton_database_url=database_url,
            timer_storage_path=tmp_path / "t" / "timers.json",
        )
    )
    yield rt
    rt.close()


@asynccontextmanager
async def running(runtime: Runtime) -> AsyncIterator[Scheduler]:
    scheduler = Scheduler(runtime)
    task = asyncio.get_running_loop().create_task(scheduler.run())
    try:
        yield scheduler
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(predicate: Callable[[], Any], seconds: float = 300.0) -> Any:
    """Poll ``predicate`` until it is truthy (fails after ``seconds``: a hang guard, not a margin)."""
    with anyio.fail_after(seconds):
        while not (value := predicate()):
            await anyio.sleep(0.02)
    return value


def fired(runtime: Runtime, timer_id: str) -> list[dict[str, Any]]:
    return [
        r.payload
        for r in runtime.receipts.list(kind="timer_fired", limit=1000)
        if r.payload["timer_id"] == timer_id
    ]


def in_future(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


@pytest.mark.parametrize(
    ("schedule", "action", "error_class"),
    [
        ({"fire_at": "2001-01-01T00:00:00Z"}, RECORD, "timer_schedule_invalid"),
        ({"fire_at": "2999-01-01T00:00:00"}, RECORD, "timer_schedule_invalid"),
        ({"fire_at": "next tuesday"}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": -1}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": 0}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": float("inf")}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": 1e20}, RECORD, "timer_schedule_invalid"),
        ({"interval_seconds": -5}, RECORD, "timer_schedule_invalid"),
        ({"interval_seconds": 0.01}, RECORD, "timer_schedule_invalid"),
        ({}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": 1, "interval_seconds": 1}, RECORD, "timer_schedule_invalid"),
        ({"delay_seconds": 1}, {"kind": "explode"}, "timer_action_invalid"),
        ({"delay_seconds": 1}, {"channel": "slack"}, "timer_action_invalid"),
        ({"delay_seconds": 1}, {"kind": "notify", "channel": "slack"}, "timer_action_invalid"),
        ({"delay_seconds": 1}, {"kind": "spawn_subagent", "task": ""}, "timer_action_invalid"),
        ({"delay_seconds": 1}, {"kind": "record", "extra": 1}, "timer_action_invalid"),
    ],
)
def test_bad_schedules_and_actions_are_refused_with_their_error_class(
    runtime: Runtime, schedule: dict[str, Any], action: dict[str, Any], error_class: str
) -> None:
    service = TimerService(runtime)
    with pytest.raises(BatonError) as caught:
        service.set(TimerRequest(name="bad", action=action, **schedule))
    assert caught.value.error_class == error_class
    assert service.list() == []


def test_a_blank_name_is_invalid_arguments(runtime: Runtime) -> None:
    with pytest.raises(BatonError) as caught:
        TimerService(runtime).set(TimerRequest(name="   ", action=RECORD, delay_seconds=5))
    assert caught.value.error_class == "invalid_arguments"


def test_fire_at_with_an_offset_is_stored_in_utc(runtime: Runtime) -> None:
    moment = datetime.now(UTC) + timedelta(hours=2)
    local = moment.astimezone(datetime.now().astimezone().tzinfo).replace(microsecond=0)
    result = TimerService(runtime).set(TimerRequest(name="x", action=RECORD, fire_at=local.isoformat()))
    assert result["next_fire_at"] == format_time(local)
    assert result["next_fire_at"].endswith("+00:00")


def test_interval_grid_skips_missed_repetitions_and_stays_on_schedule() -> None:
    due = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_after(due, 10, due + timedelta(seconds=1)) == (due + timedelta(seconds=10), 0)
    assert next_after(due, 10, due + timedelta(seconds=35)) == (due + timedelta(seconds=40), 3)
    assert next_after(due, 10, due + timedelta(seconds=40)) == (due + timedelta(seconds=50), 4)


def test_cancel_is_final_and_errors_name_the_reason(runtime: Runtime) -> None:
    service = TimerService(runtime)
    timer = service.set(TimerRequest(name="x", action=RECORD, delay_seconds=60))
    cancelled = service.cancel(timer["timer_id"])
    assert cancelled["status"] == "cancelled" and cancelled["next_fire_at"] is None
    with pytest.raises(BatonError) as again:
        service.cancel(timer["timer_id"])
    assert again.value.error_class == "timer_already_cancelled"
    with pytest.raises(BatonError) as unknown:
        service.cancel("tm_nope")
    assert unknown.value.error_class == "timer_not_found"
    assert service.claim(timer["timer_id"], timer["next_fire_at"], now_utc(), missed=False) is None


def test_a_due_time_is_claimed_once_by_competing_claimers(runtime: Runtime, tmp_path: Path) -> None:
    other = Runtime.open(runtime.settings)
    try:
        mine, theirs = TimerService(runtime), TimerService(other)
        timer = mine.set(TimerRequest(name="x", action=RECORD, interval_seconds=5))
        due = timer["next_fire_at"]
        later = now_utc() + timedelta(seconds=6)
        first = mine.claim(timer["timer_id"], due, later, missed=False)
        assert first is not None and first.next_fire_at is not None
        assert theirs.claim(timer["timer_id"], due, later, missed=False) is None
        assert mine.claim(timer["timer_id"], due, later, missed=False) is None
        assert theirs.claim(timer["timer_id"], first.next_fire_at, later + timedelta(seconds=5), missed=False)
    finally:
        other.close()


@pytest.mark.anyio
async def test_a_short_delay_fires_once_with_a_receipt(runtime: Runtime) -> None:
    async with running(runtime) as scheduler:
        timer = scheduler.service.set(TimerRequest(name="soon", action=RECORD, delay_seconds=0.2))
        receipts = await until(lambda: fired(runtime, timer["timer_id"]))
        state = await until(
            lambda: (
                (t := scheduler.service.get(timer["timer_id"]))["last_firing"]["outcome"] != "running" and t
            )
        )
    assert len(receipts) == 1
    (receipt,) = receipts
    assert receipt["outcome"] == "succeeded" and receipt["missed"] is False
    assert receipt["due_at"] == timer["next_fire_at"] and receipt["fired_at"] >= receipt["due_at"]
    assert state["status"] == "completed" and state["fire_count"] == 1
    assert runtime.receipts.verify().ok


@pytest.mark.anyio
async def test_an_interval_repeats_on_schedule_until_cancelled(runtime: Runtime) -> None:
    async with running(runtime) as scheduler:
        timer = scheduler.service.set(TimerRequest(name="tick", action=RECORD, interval_seconds=0.2))
        await until(lambda: len(fired(runtime, timer["timer_id"])) >= 3)
        scheduler.service.cancel(timer["timer_id"])
        count = scheduler.service.get(timer["timer_id"])["fire_count"]
        marker = scheduler.service.set(TimerRequest(name="after", action=RECORD, delay_seconds=0.5))
        await until(lambda: fired(runtime, marker["timer_id"]))
    receipts = fired(runtime, timer["timer_id"])
    assert len(receipts) == count
    dues = [datetime.fromisoformat(r["due_at"]) for r in receipts]
    steps = [(b - a).total_seconds() / 0.2 for a, b in itertools.pairwise(dues)]
    assert all(step >= 0.999 and abs(step - round(step)) < 1e-3 for step in steps), steps
    assert [r["sequence"] for r in receipts] == list(range(1, count + 1))


@pytest.mark.anyio
async def test_a_cancelled_timer_never_fires(runtime: Runtime) -> None:
    # set and cancelled before any scheduler runs: however slow the machine, it was never due while active
    service = TimerService(runtime)
    doomed = service.set(TimerRequest(name="doomed", action=RECORD, delay_seconds=0.3))
    service.cancel(doomed["timer_id"])
    async with running(runtime) as scheduler:
        marker = scheduler.service.set(TimerRequest(name="marker", action=RECORD, delay_seconds=0.5))
        await until(lambda: fired(runtime, marker["timer_id"]))
    assert fired(runtime, doomed["timer_id"]) == []


class StubNotifier:
    """The notifier interface (``async send(channel, message) -> dict``) answering from a script: only for what
    no loopback peer can make the real notifier do (raise); delivery outcomes use a real webhook below."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.sent: list[tuple[str, str]] = []

    async def send(self, channel: str, message: str) -> dict[str, Any]:
        self.sent.append((channel, message))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("notifier", "outcome", "error_class"),
    [
        (None, "failed", "notification_not_configured"),
        (
            StubNotifier(NotificationError("notification_not_configured", "missing")),
            "failed",
            "notification_not_configured",
        ),
        (StubNotifier(RuntimeError("boom")), "failed", "notification_delivery_failed"),
    ],
)
async def test_notify_firings_record_the_notifiers_outcome_and_never_crash(
    runtime: Runtime, notifier: StubNotifier | None, outcome: str, error_class: str | None
) -> None:
    if notifier is not None:
        notifier.sent.clear()  # the parameter objects are shared by the SQLite and PostgreSQL runs
        runtime.services["notifier"] = notifier
    async with running(runtime) as scheduler:
        action = {"kind": "notify", "channel": "slack", "message": "build finished"}
        timer = scheduler.service.set(TimerRequest(name="n", action=action, delay_seconds=0.1))
        (receipt,) = await until(lambda: fired(runtime, timer["timer_id"]))
        survivor = scheduler.service.set(TimerRequest(name="after", action=RECORD, delay_seconds=0.1))
        await until(lambda: fired(runtime, survivor["timer_id"]))
    assert receipt["outcome"] == outcome and receipt["error_class"] == error_class
    if notifier is not None:
        assert notifier.sent == [("slack", "build finished")]


def open_slack_runtime(home: Path, database_url: str, web: WebhookReceiver, **env: str) -> Runtime:
    """A runtime whose notifier is the real one, posting Slack messages to a loopback webhook receiver."""
    settings = {
        "BATON_HOME": str(home),
        "BATON_DATABASE_URL": database_url,
        "SLACK_WEBHOOK_URL": web.url(SLACK_PATH),
        **DELIVERY,
        **env,
    }
    rt = Runtime.open(load_settings(settings))
    rt.services["notifier"] = Notifier(rt)
    return rt


@pytest.fixture
def slack_runtime(tmp_path: Path, database_url: str, web: WebhookReceiver) -> Iterator[Runtime]:
    rt = open_slack_runtime(tmp_path / "home", database_url, web)
    yield rt
    rt.close()


@pytest.fixture
def web() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "outcome"), [(200, "succeeded"), (500, "failed")])
async def test_a_notify_firing_records_what_the_real_webhook_answered(
    slack_runtime: Runtime, web: WebhookReceiver, status: int, outcome: str
) -> None:
    web.status = status
    async with running(slack_runtime) as scheduler:
        action = {"kind": "notify", "channel": "slack", "message": "build finished"}
        timer = scheduler.service.set(TimerRequest(name="n", action=action, delay_seconds=0.1))
        (receipt,) = await until(lambda: fired(slack_runtime, timer["timer_id"]))
        survivor = scheduler.service.set(TimerRequest(name="after", action=RECORD, delay_seconds=0.1))
        await until(lambda: fired(slack_runtime, survivor["timer_id"]))
    assert receipt["outcome"] == outcome
    assert receipt["error_class"] == (None if status == 200 else "notification_delivery_failed")
    posts = [r for r in web.requests if r.path == SLACK_PATH]
    assert [p.json for p in posts] == [{"text": "build finished"}] * (1 if status == 200 else 2)


@pytest.mark.anyio
async def test_a_firing_whose_webhook_hangs_is_cut_off_by_shutdown_and_still_writes_its_receipt(
    tmp_path: Path, database_url: str, web: WebhookReceiver
) -> None:
    web.hang()  # and a delivery timeout far longer than the test: only the shutdown ends the firing
    slack_runtime = open_slack_runtime(
        tmp_path / "home", database_url, web, BATON_NOTIFY_TIMEOUT_SECONDS="120"
    )
    try:
        await _cut_off_by_shutdown(slack_runtime, web)
    finally:
        slack_runtime.close()


async def _cut_off_by_shutdown(slack_runtime: Runtime, web: WebhookReceiver) -> None:
    async with running(slack_runtime) as scheduler:
        action = {"kind": "notify", "channel": "slack", "message": "slow"}
        timer = scheduler.service.set(TimerRequest(name="slow", action=action, delay_seconds=0.1))
        await until(lambda: web.requests)  # the webhook holds the request open
        assert scheduler.service.get(timer["timer_id"])["last_firing"]["outcome"] == "running"
    (receipt,) = fired(slack_runtime, timer["timer_id"])
    assert receipt["outcome"] == "failed" and receipt["error_class"] == "interrupted_by_restart"


@pytest.mark.anyio
async def test_a_timer_due_before_start_fires_once_marked_missed(runtime: Runtime) -> None:
    service = TimerService(runtime)
    once = service.set(TimerRequest(name="once", action=RECORD, delay_seconds=0.1))
    every = service.set(TimerRequest(name="every", action=RECORD, interval_seconds=0.1))
    await until(lambda: now_utc() > datetime.fromisoformat(every["next_fire_at"]) + timedelta(seconds=0.35))
    async with running(runtime):
        (missed_once,) = await until(lambda: fired(runtime, once["timer_id"]))
        first, *rest = await until(
            lambda: (
                fired(runtime, every["timer_id"])[:2] if len(fired(runtime, every["timer_id"])) >= 2 else None
            )
        )
    assert missed_once["missed"] is True
    assert first["missed"] is True and first["skipped"] >= 3
    assert rest[0]["missed"] is False and rest[0]["due_at"] == first["next_fire_at"]


def test_the_mirror_follows_the_store_and_a_fresh_store_adopts_it(runtime: Runtime, tmp_path: Path) -> None:
    path = runtime.settings.timer_storage_path
    assert path is not None
    service = TimerService(runtime)
    keep = service.set(TimerRequest(name="keep", action=RECORD, delay_seconds=60))
    gone = service.set(TimerRequest(name="gone", action=RECORD, delay_seconds=60))
    service.cancel(gone["timer_id"])
    document = json.loads(path.read_text())
    by_id = {t["id"]: t for t in document["timers"]}
    assert by_id[keep["timer_id"]]["status"] == "active"
    assert by_id[gone["timer_id"]]["status"] == "cancelled"
    assert oct(path.stat().st_mode & 0o777) == "0o600"

    fresh = Runtime.open(Settings(baton_home=tmp_path / "other", timer_storage_path=path))
    try:
        adopted = TimerService(fresh)
        assert mirror.adopt(fresh) == 2
        assert mirror.adopt(fresh) == 0
        assert adopted.get(keep["timer_id"])["next_fire_at"] == keep["next_fire_at"]
        assert adopted.get(gone["timer_id"])["status"] == "cancelled"
    finally:
        fresh.close()
