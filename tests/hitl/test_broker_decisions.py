"""The broker's decisions in-process, as the store records them: a late decision expires the request, the
sweep counts what it expired, a signed link is spent with its decision, the decision's receipt, and a
waiting window with its progress ticks.

Written for the survivors of the mutation run over ``hitl/broker.py`` (docs/testing.md).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from baton.errors import ArgumentError, HitlError
from baton.evidence.canonical import iso
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.hitl.broker import Decision, HitlBroker, NewRequest, get_broker
from baton.hitl.records import MAX_TIMEOUT_SECONDS
from baton.runtime import Runtime
from baton.store.schema import hitl_link_uses, hitl_requests
from baton.testing.clock import ManualClock

pytestmark = pytest.mark.anyio


def stored(runtime: Runtime, request_id: str) -> tuple[str, bool | None]:
    """The request's status and approved columns as other processes read them from the store."""
    with runtime.store.read() as connection:
        row = connection.execute(
            select(hitl_requests.c.status, hitl_requests.c.approved).where(hitl_requests.c.id == request_id)
        ).one()
    return row.status, row.approved


def past_expiry(manual_clock: ManualClock, *views: dict[str, Any]) -> None:
    """Move the clock past every one of ``views``' expiry (no wait, no race: the broker reads this clock)."""
    manual_clock.advance(max(view["expires_epoch"] for view in views) - manual_clock.time() + 1)


async def test_a_late_decision_expires_its_request_alone_and_the_sweep_counts_the_rest(
    broker: HitlBroker, runtime: Runtime, manual_clock: ManualClock
) -> None:
    live = await broker.create(NewRequest("approval", "live", timeout_seconds=60))
    due = [await broker.create(NewRequest("approval", f"due {n}", timeout_seconds=1)) for n in range(3)]
    assert broker.expire_due() == 0
    past_expiry(manual_clock, *due)
    with pytest.raises(HitlError) as late:
        broker.respond(due[0]["request_id"], Decision(approved=True))
    assert late.value.error_class == "hitl_request_expired"
    assert late.value.details == {"request_id": due[0]["request_id"]}
    assert stored(runtime, due[0]["request_id"]) == ("expired", False)
    assert [stored(runtime, view["request_id"])[0] for view in due[1:]] == ["pending", "pending"]
    (expired,) = runtime.receipts.list(kind="hitl_expired")
    assert set(expired.payload) == {"request_id", "expired_at"}
    assert expired.payload["request_id"] == due[0]["request_id"]
    assert broker.expire_due() == 2
    assert broker.expire_due() == 0
    assert [stored(runtime, view["request_id"]) for view in due] == [("expired", False)] * 3
    assert len(runtime.receipts.list(kind="hitl_expired")) == 3
    assert stored(runtime, live["request_id"]) == ("pending", None)


async def test_a_page_sweeps_what_expired_before_counting(
    broker: HitlBroker, runtime: Runtime, manual_clock: ManualClock
) -> None:
    live = await broker.create(NewRequest("approval", "live", timeout_seconds=60))
    due = await broker.create(NewRequest("approval", "due", timeout_seconds=1))
    past_expiry(manual_clock, due)
    page = broker.page_pending(10)
    assert ([view["request_id"] for view in page.requests], page.total) == ([live["request_id"]], 1)
    assert stored(runtime, due["request_id"]) == ("expired", False)
    assert [r.payload["request_id"] for r in runtime.receipts.list(kind="hitl_expired")] == [
        due["request_id"]
    ]


async def test_a_signed_link_is_spent_with_its_decision_and_only_once(
    broker: HitlBroker, runtime: Runtime
) -> None:
    first = await broker.create(NewRequest("approval", "first", timeout_seconds=60))
    second = await broker.create(NewRequest("approval", "second", timeout_seconds=60))
    assert broker.link_spent("nonce-1") is False
    decided = broker.respond(first["request_id"], Decision(approved=True, via="link"), spend_link="nonce-1")
    assert broker.link_spent("nonce-1") is True
    assert broker.link_spent("nonce-2") is False
    with runtime.store.read() as connection:
        uses = connection.execute(select(hitl_link_uses)).all()
    assert [tuple(use) for use in uses] == [("nonce-1", first["request_id"], decided["responded_at"])]
    with pytest.raises(HitlError) as reused:
        broker.respond(second["request_id"], Decision(approved=True, via="link"), spend_link="nonce-1")
    assert reused.value.error_class == "hitl_link_invalid"
    assert reused.value.details == {"request_id": second["request_id"]}
    assert stored(runtime, second["request_id"]) == ("pending", None)
    fresh = broker.respond(second["request_id"], Decision(approved=True, via="link"), spend_link="nonce-2")
    assert fresh["approved"] is True and broker.link_spent("nonce-2") is True


async def test_a_decision_is_stored_and_receipted_with_every_field(
    broker: HitlBroker, runtime: Runtime
) -> None:
    view = await broker.create(NewRequest("approval", "Ship?", timeout_seconds=60, agent="ci-bot"))
    decided = broker.respond(
        view["request_id"], Decision(approved=False, admin_notes="not now", via="cli", decided_by="ana")
    )
    assert (decided["status"], decided["decided_via"], decided["decided_by"], decided["admin_notes"]) == (
        "rejected",
        "cli",
        "ana",
        "not now",
    )
    assert decided["responded_at"] is not None
    (receipt,) = runtime.receipts.list(kind="hitl_decided")
    assert receipt.payload == {
        "request_id": view["request_id"],
        "kind": "approval",
        "decision": "rejected",
        "approved": False,
        "response": None,
        "admin_notes": "not now",
        "notes": [{"by": "ana", "notes": "not now"}],
        "via": "cli",
        "decided_by": "ana",
        "approvers": ["ana"],
        "proofs": [],  # a rejection: no approver to prove
        "required_approvals": 1,
        "step_up": False,
        "waiter_gone": True,
        "responded_at": decided["responded_at"],
        "agent": "ci-bot",
    }


async def test_a_waiting_window_ends_pending_with_progress_ticks_on_the_way(broker: HitlBroker) -> None:
    view = await broker.create(NewRequest("approval", "Slow human", timeout_seconds=60))
    ticks: list[tuple[float, float]] = []

    async def tick(waited: float, total: float) -> None:
        ticks.append((waited, total))

    with anyio.fail_after(300):
        windowed = await broker.wait(view["request_id"], window_seconds=0.3, tick=tick, tick_seconds=0.1)
        silent = await broker.wait(view["request_id"], window_seconds=0.25, tick_seconds=0.1)
    assert (windowed["status"], silent["status"]) == ("pending", "pending")
    assert 1 <= len(ticks) <= 4  # one tick per tick_seconds of the window, at most
    for waited, total in ticks:
        assert total == pytest.approx(0.3)
        assert 0 < waited < 60  # seconds since the call began, not an epoch
    assert broker.waiters.slots == {}


def test_the_runtime_has_one_broker(runtime: Runtime) -> None:
    broker = get_broker(runtime)
    assert get_broker(runtime) is broker
    assert runtime.services["hitl"] is broker


async def test_a_waiter_in_another_process_is_not_gone(runtime: Runtime) -> None:
    """A second runtime on the same store stands for another process deciding while this one waits."""
    waiting, deciding = get_broker(runtime), HitlBroker(Runtime.open(runtime.settings))
    try:
        view = await waiting.create(NewRequest("approval", "Across processes?", timeout_seconds=60))
        request_id = view["request_id"]
        results: list[dict[str, Any]] = []

        async def wait() -> None:
            results.append(await waiting.wait(request_id))

        with anyio.fail_after(300):
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                while not waiting.waiters.is_waiting(request_id):
                    await anyio.sleep(0.01)
                decided = deciding.respond(request_id, Decision(approved=True, via="cli"))
        assert (decided["approved"], decided["waiter_gone"]) == (True, False)
        assert results[0]["status"] == "approved"
    finally:
        deciding.runtime.close()


async def test_a_request_is_stored_and_receipted_with_every_field(
    broker: HitlBroker, runtime: Runtime
) -> None:
    context, options = {"diff": "+1 -1"}, ["red", "blue"]
    view = await broker.create(NewRequest("input", "Which?", context, 90, urgent=True, options=options))
    assert "hitl-announce" in {task.get_name() for task in asyncio.all_tasks()}  # named for task dumps
    assert re.fullmatch(r"hr_[0-9a-f]{20}", view["request_id"])
    assert (view["context"], view["options"], view["urgent"]) == (context, options, True)
    assert view["expires_at"] == iso(view["expires_epoch"])
    (receipt,) = runtime.receipts.list(kind="hitl_requested")
    assert receipt.payload == {
        "request_id": view["request_id"],
        "kind": "input",
        "message": "Which?",
        "context_sha256": sha256_hex(canonical_json(context)),
        "options": options,
        "urgent": True,
        "timeout_seconds": 90,
        "required_approvals": 1,
        "step_up": False,
        "arguments_sha256": sha256_hex(canonical_json(context)),
        "created_at": view["created_at"],
        "expires_at": view["expires_at"],
        "agent": None,  # asked by no named agent (the broker called directly)
        "provenance": None,  # nor through an MCP client, a subagent or the gateway
        "escalation": [],  # no steps: none asked for, none configured (BATON_HITL_ESCALATION)
    }
    plain = await broker.create(NewRequest("approval", "Plain?", timeout_seconds=MAX_TIMEOUT_SECONDS))
    assert (plain["context"], plain["options"], plain["urgent"]) == (None, None, False)


@pytest.mark.parametrize("seconds", [-5, MAX_TIMEOUT_SECONDS + 1])
async def test_a_timeout_out_of_bounds_is_refused(broker: HitlBroker, runtime: Runtime, seconds: int) -> None:
    with pytest.raises(ArgumentError) as refused:
        await broker.create(NewRequest("approval", "When?", timeout_seconds=seconds))
    assert refused.value.error_class == "invalid_arguments"
    assert f"between 1 and {MAX_TIMEOUT_SECONDS} seconds" in str(refused.value)
    assert broker.list_pending() == [] and runtime.receipts.list(kind="hitl_requested") == []


def test_an_unknown_request_is_not_found_by_its_id(broker: HitlBroker) -> None:
    with pytest.raises(HitlError) as unknown:
        broker.get("hr_nope")
    assert (unknown.value.error_class, unknown.value.details) == (
        "hitl_request_not_found",
        {"request_id": "hr_nope"},
    )
    assert str(unknown.value) == "No human-in-the-loop request has the id 'hr_nope'."
