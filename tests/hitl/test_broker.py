"""The broker core in-process: first decision wins, conservative expiry, wakeups, announcer hook, receipts."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from baton.config import load_settings
from baton.errors import HitlError
from baton.hitl.broker import Decision, HitlBroker, NewRequest
from baton.identity.links import LinkSigner
from baton.runtime import Runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def runtime(baton_env: dict[str, str], database_url: str) -> Iterator[Runtime]:
    """The broker's store on SQLite and on PostgreSQL."""
    rt = Runtime.open(load_settings({**baton_env, "BATON_DATABASE_URL": database_url}))
    yield rt
    rt.close()


async def test_two_racing_responders_exactly_one_wins(broker: HitlBroker, runtime: Runtime) -> None:
    view = await broker.create(NewRequest("approval", "Ship it?", timeout_seconds=60))
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def responder(approved: bool) -> None:
        barrier.wait()
        try:
            outcomes.append(broker.respond(view["request_id"], Decision(approved=approved, via="race")))
        except HitlError as exc:
            outcomes.append(exc.error_class)

    threads = [threading.Thread(target=responder, args=(flag,)) for flag in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    wins = [o for o in outcomes if isinstance(o, dict)]
    assert len(wins) == 1 and outcomes.count("hitl_request_already_decided") == 1, outcomes
    final = broker.get(view["request_id"])
    assert final["status"] == wins[0]["status"] and final["approved"] is (wins[0]["status"] == "approved")
    decided = runtime.receipts.list(kind="hitl_decided")
    assert len(decided) == 1 and decided[0].payload["request_id"] == view["request_id"]


async def test_two_hundred_waiters_each_get_their_own_decision(broker: HitlBroker) -> None:
    views = [
        await broker.create(NewRequest("approval", f"request {i}", timeout_seconds=120)) for i in range(200)
    ]
    expected = {view["request_id"]: random.choice([True, False]) for view in views}
    results: dict[str, dict[str, Any]] = {}

    async def waiter(request_id: str) -> None:
        results[request_id] = await broker.wait(request_id)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            for request_id in expected:
                group.start_soon(waiter, request_id)
            with anyio.fail_after(300):
                while len(broker.waiters.slots) < len(expected):
                    await anyio.sleep(0.01)
            order = list(expected)
            random.shuffle(order)
            for request_id in order:
                broker.respond(request_id, Decision(approved=expected[request_id], admin_notes=request_id))
                await anyio.lowlevel.checkpoint()
    assert set(results) == set(expected)
    for request_id, view in results.items():
        assert view["request_id"] == request_id
        assert view["approved"] is expected[request_id]
        assert view["status"] == ("approved" if expected[request_id] else "rejected")
        assert view["admin_notes"] == request_id
        assert view["waiter_gone"] is False
    assert broker.waiters.slots == {}


async def test_timeout_expires_the_request_and_never_approves(broker: HitlBroker, runtime: Runtime) -> None:
    view = await broker.create(NewRequest("approval", "Nobody answers", timeout_seconds=1))
    final = await broker.wait(view["request_id"])
    assert final["status"] == "expired" and final["approved"] is False
    with pytest.raises(HitlError) as late:
        broker.respond(view["request_id"], Decision(approved=True))
    assert late.value.error_class == "hitl_request_expired"
    assert broker.get(view["request_id"])["approved"] is False
    assert [r.payload["request_id"] for r in runtime.receipts.list(kind="hitl_expired")] == [
        view["request_id"]
    ]


async def test_malformed_or_unknown_decisions_change_nothing(broker: HitlBroker) -> None:
    approval = await broker.create(NewRequest("approval", "Approve?", timeout_seconds=60))
    question = await broker.create(NewRequest("input", "Which?", timeout_seconds=60, options=["red", "blue"]))
    for request_id, decision in [
        (approval["request_id"], Decision(approved=None)),
        (approval["request_id"], Decision(approved="yes")),  # type: ignore[arg-type]
        (question["request_id"], Decision(response="green")),
        (question["request_id"], Decision(response="  ")),
    ]:
        with pytest.raises(HitlError) as refused:
            broker.respond(request_id, decision)
        assert refused.value.error_class == "hitl_response_invalid"
        assert broker.get(request_id)["status"] == "pending"
    with pytest.raises(HitlError) as unknown:
        broker.respond("hr_nope", Decision(approved=True))
    assert unknown.value.error_class == "hitl_request_not_found"
    answered = broker.respond(question["request_id"], Decision(response="blue", via="cli"))
    assert (
        answered["status"] == "answered" and answered["response"] == "blue" and answered["approved"] is False
    )


async def test_a_decision_with_no_live_waiter_is_marked_waiter_gone(broker: HitlBroker) -> None:
    view = await broker.create(NewRequest("approval", "Anyone there?", timeout_seconds=60))
    with anyio.move_on_after(0.3):
        await broker.wait(view["request_id"])  # the call is abandoned, as a client cutting it would
    decided = broker.respond(view["request_id"], Decision(approved=True))
    assert decided["waiter_gone"] is True and decided["approved"] is True


async def test_pending_list_is_urgent_first_then_soonest_expiry(broker: HitlBroker) -> None:
    late = await broker.create(NewRequest("approval", "late", timeout_seconds=600))
    soon = await broker.create(NewRequest("approval", "soon", timeout_seconds=300))
    urgent = await broker.create(NewRequest("input", "urgent", timeout_seconds=900, urgent=True))
    ids = [view["request_id"] for view in broker.list_pending()]
    assert ids == [urgent["request_id"], soon["request_id"], late["request_id"]]


async def test_secrets_in_a_request_are_redacted_before_they_are_stored(broker: HitlBroker) -> None:
    secret = "sk-live-0123456789abcdefghij"
    view = await broker.create(NewRequest("approval", f"Use key {secret}?", {"key": secret}, 60))
    assert secret not in repr(broker.get(view["request_id"]))


class RecordingAnnouncer:
    """A tiny announcer as the notifications subsystem would register it."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[dict[str, Any], str | None]] = []
        self.called = anyio.Event()

    async def announce(self, request: dict[str, Any], link: str | None) -> list[dict[str, Any]]:
        self.calls.append((request, link))
        self.called.set()
        if self.fail:
            raise RuntimeError("SMTP exploded")
        return [{"channel": "webhook", "success": True, "body": f"decide at {link}"}]


async def _announced(runtime: Runtime) -> list[Any]:
    with anyio.fail_after(300):
        while not (rows := runtime.receipts.list(kind="hitl_announced")):
            await anyio.sleep(0.01)
    return rows


async def test_the_announcer_gets_each_request_and_a_signed_link(
    broker: HitlBroker, runtime: Runtime
) -> None:
    announcer = RecordingAnnouncer()
    runtime.services["hitl_announcer"] = announcer
    runtime.services["http_base_url"] = "http://127.0.0.1:8765"
    view = await broker.create(NewRequest("approval", "Announce me", {"x": 1}, 60, urgent=True))
    rows = await _announced(runtime)
    request, link = announcer.calls[0]
    assert request["request_id"] == view["request_id"] and request["urgent"] is True
    assert link is not None and link.startswith("http://127.0.0.1:8765/inbox/link?")
    from urllib.parse import parse_qs, urlsplit

    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    claim = LinkSigner.for_runtime(runtime).verify_link(query["r"], query["e"], query["n"], query["s"])
    assert claim.request_id == view["request_id"]
    assert query["s"] not in rows[0].model_dump_json()  # the link never lands in a receipt
    assert rows[0].payload["link_sent"] is True and rows[0].payload["deliveries"][0]["success"] is True


async def test_a_failing_announcer_never_affects_the_request(broker: HitlBroker, runtime: Runtime) -> None:
    runtime.services["hitl_announcer"] = RecordingAnnouncer(fail=True)
    view = await broker.create(NewRequest("approval", "Still fine?", timeout_seconds=60))
    rows = await _announced(runtime)
    assert rows[0].payload["deliveries"][0]["error_class"] == "notification_delivery_failed"
    assert rows[0].payload["link_sent"] is False
    assert broker.respond(view["request_id"], Decision(approved=True))["approved"] is True
    assert runtime.receipts.verify().ok


async def test_result_shapes_of_waiting_calls(broker: HitlBroker) -> None:
    from baton.hitl.waiting import outcome

    question = await broker.create(NewRequest("input", "Name?", timeout_seconds=60))
    with pytest.raises(HitlError) as pending:
        outcome(broker.get(question["request_id"]))
    assert pending.value.error_class == "hitl_still_pending" and pending.value.details["timeout"] is False
    declined = outcome(broker.respond(question["request_id"], Decision(approved=False, admin_notes="no")))
    assert (
        declined["declined"] is True and declined["response"] is None and declined["decision"] == "rejected"
    )
    assert "approved" not in declined
    approval = await broker.create(NewRequest("approval", "Go?", timeout_seconds=60))
    rejected = outcome(broker.respond(approval["request_id"], Decision(approved=False)))
    assert (
        rejected["approved"] is False and rejected["timeout"] is False and rejected["decision"] == "rejected"
    )
    assert set(rejected) >= {
        "request_id",
        "approved",
        "timeout",
        "decision",
        "admin_notes",
        "responded_at",
        "waited_seconds",
    }


async def test_pending_pages_walk_every_request_once_urgent_first(broker: HitlBroker) -> None:
    for index in range(23):
        await broker.create(
            NewRequest("approval", f"page {index}", timeout_seconds=60 + index, urgent=index % 5 == 0)
        )
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = broker.page_pending(10, cursor)
        assert page.total == 23
        seen += page.requests
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == 23 and len({view["request_id"] for view in seen}) == 23
    assert seen == broker.list_pending()
    assert [view["urgent"] for view in seen] == [True] * 5 + [False] * 18


async def test_a_cursor_baton_did_not_make_is_invalid_arguments(broker: HitlBroker) -> None:
    from baton.errors import ArgumentError

    with pytest.raises(ArgumentError) as refused:
        broker.page_pending(10, "bm90IGEgY3Vyc29y")
    assert refused.value.error_class == "invalid_arguments"
