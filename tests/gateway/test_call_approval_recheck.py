"""The two checks between a human's decision and the upstream call, each on its own, on a real store.

An approval-gated call passes two gates after the person decides: ``_granted_or_refused`` turns the
outcome into an approval or raises, and ``still_valid`` re-reads the request from the store just before the
upstream call. The proxy's end-to-end tests cannot tell the two apart (a rejection passed on by the first
is refused by the second with the same class), so each is tested here alone.

Written for the survivors of a hand-mutation run over ``gateway/proxy.py`` and ``gateway/call_approval.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from baton.boundary.toolkit import CallContext
from baton.errors import HitlError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.serving.call_approval import _granted_or_refused, still_valid
from baton.hitl.broker import Decision, NewRequest, get_broker
from baton.identity.agents import Caller
from baton.runtime import Runtime
from baton.store.schema import hitl_requests

pytestmark = pytest.mark.anyio

ARGUMENTS = {"amount": 5, "to": "bob"}
DIGEST = sha256_hex(canonical_json(ARGUMENTS))
AGENT = Caller("payments-agent")


async def gated_request(runtime: Runtime, approved: bool | None, agent: Caller = AGENT) -> dict[str, Any]:
    """A gateway call's approval request as ``call_approval`` creates it, decided ``approved`` (None: not)."""
    broker = get_broker(runtime)
    view = await broker.create(
        NewRequest(
            "approval",
            "demo__transfer",
            {"arguments": ARGUMENTS, "arguments_sha256": DIGEST},
            3600,
            arguments_sha256=DIGEST,
            agent=agent.name,
        )
    )
    if approved is not None:
        broker.respond(view["request_id"], Decision(approved=approved, via="cli"))
    return {"request_id": view["request_id"], "arguments_sha256": DIGEST}


def refused_checks(
    runtime: Runtime, approval: dict[str, Any], arguments: dict[str, Any], agent: Caller
) -> Any:
    """The checks ``still_valid`` names as it refuses the call (it must refuse)."""
    with pytest.raises(HitlError) as refused:
        still_valid(runtime, approval, arguments, CallContext(agent=agent))
    assert refused.value.error_class == "approval_denied"
    assert refused.value.details["request_id"] == approval["request_id"]
    return refused.value.details["failed_checks"]


async def test_an_explicit_approval_of_these_arguments_by_this_agent_in_time_goes_through(
    runtime: Runtime,
) -> None:
    approval = await gated_request(runtime, approved=True)
    still_valid(runtime, approval, ARGUMENTS, CallContext(agent=AGENT))  # does not raise


async def test_the_recheck_refuses_each_broken_condition_alone(runtime: Runtime) -> None:
    rejected = await gated_request(runtime, approved=False)
    assert refused_checks(runtime, rejected, ARGUMENTS, AGENT) == ["approved"]

    undecided = await gated_request(runtime, approved=None)
    assert refused_checks(runtime, undecided, ARGUMENTS, AGENT) == ["approved", "in_time"]

    approved = await gated_request(runtime, approved=True)
    assert refused_checks(runtime, approved, {**ARGUMENTS, "amount": 5000}, AGENT) == ["arguments"]
    assert refused_checks(runtime, approved, ARGUMENTS, Caller("another-agent")) == ["agent"]

    late = await gated_request(runtime, approved=True)
    with runtime.store.write() as connection:  # a decision stored at its expiry is not in time
        expires_at = (
            connection.execute(hitl_requests.select().where(hitl_requests.c.id == late["request_id"]))
            .one()
            .expires_at
        )
        connection.execute(
            update(hitl_requests)
            .where(hitl_requests.c.id == late["request_id"])
            .values(responded_at=expires_at)
        )
    assert refused_checks(runtime, late, ARGUMENTS, AGENT) == ["in_time"]


async def test_a_rejection_is_refused_with_the_persons_notes_and_never_becomes_an_approval(
    runtime: Runtime,
) -> None:
    request_id = (await gated_request(runtime, approved=False))["request_id"]
    with pytest.raises(HitlError) as refused:
        _granted_or_refused(
            runtime, request_id, DIGEST, {"approved": False, "admin_notes": "not this week"}, "demo__transfer"
        )
    assert refused.value.error_class == "approval_denied"
    assert "rejected" in refused.value.message
    assert refused.value.details["admin_notes"] == "not this week"
    assert refused.value.details["approval"]["request_id"] == request_id
    assert refused.value.details["approval"]["decision_receipt_seq"] is not None
    for outcome in ({}, {"approved": None}, {"approved": 0}):  # no explicit approval is an approval
        with pytest.raises(HitlError):
            _granted_or_refused(runtime, request_id, DIGEST, outcome, "demo__transfer")


async def test_an_approval_is_linked_to_its_decision_receipt(runtime: Runtime) -> None:
    request_id = (await gated_request(runtime, approved=True))["request_id"]
    approval = _granted_or_refused(runtime, request_id, DIGEST, {"approved": True}, "demo__transfer")
    (decided,) = [
        r for r in runtime.receipts.list(kind="hitl_decided") if r.payload["request_id"] == request_id
    ]
    assert approval == {
        "request_id": request_id,
        "arguments_sha256": DIGEST,
        "decision_receipt_seq": decided.seq,
        "decision_receipt_sha256": decided.sha256,
    }
