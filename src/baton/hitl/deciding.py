"""Closing a pending request in the caller's transaction: a decision (first wins), an expiry, a withdrawal.

Each one sets the request's new state, cancels its remaining escalation steps
(:func:`baton.hitl.escalation.close_in`) and appends its receipt in that one transaction. A decision locks
the row first, spends a signed link (or step-up) with it and, on a quorum, counts the approver and leaves
the request pending until the Nth. The broker opens the transactions and wakes the waiting calls
(:meth:`baton.hitl.broker.HitlBroker.respond`); this module says what each one writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select, update

from baton import clock
from baton.errors import HitlError
from baton.evidence.canonical import iso
from baton.hitl.escalation import close_in
from baton.hitl.quorum import approvers_notes, assertion_of, count_approval, joined_notes, proofs_in
from baton.hitl.records import (
    Decision,
    already_decided,
    check_approver,
    decider_name,
    decision_values,
    link_used,
    refusal,
)
from baton.hitl.waiters import Waiters
from baton.identity.os_accounts import cli_decider
from baton.runtime import Runtime
from baton.store.schema import hitl_link_uses, hitl_requests


@dataclass(frozen=True)
class _Verdict:
    """What a final decision writes: the columns :func:`decision_values` set, every approver (the decider
    alone, or a quorum's people in order) and whether nobody waits for the request any more."""

    values: dict[str, Any]
    approvers: list[str]
    waiter_gone: bool
    #: Every decider's notes with who wrote each: a quorum's approvers in order, then a rejecter.
    notes: list[dict[str, str]]
    #: An approval's approvers, each with the path and (a passkey approval's) WebAuthn assertion.
    proofs: list[dict[str, Any]]

    @property
    def decided_by(self) -> str:
        """The ``decided_by`` column: the approvers, comma-separated."""
        return ", ".join(self.approvers)


def decide_in(
    runtime: Runtime,
    waiters: Waiters,
    connection: Connection,
    request_id: str,
    decision: Decision,
    spend_link: str | None,
) -> tuple[HitlError | None, bool]:
    """Decide inside one transaction; raising rolls everything back, an expiry is returned to commit.

    Returns ``(expiry, final)``: ``final`` is false for a partial approval of a quorum."""
    now = clock.time()
    query = select(hitl_requests).where(hitl_requests.c.id == request_id).with_for_update()
    row = connection.execute(query).first()
    refused = refusal(row, now, request_id)
    if refused is not None:
        if refused.error_class == "hitl_request_expired" and row is not None and row.status == "pending":
            expire_in(runtime, connection, request_id, now)
            return refused, False
        raise refused
    assert row is not None
    values = decision_values(row, decision, runtime.redactor.text)
    by = decider_name(decision) if decision.os_uid is None else cli_decider(connection, decision.os_uid)
    if values["status"] == "approved":
        check_approver(runtime, row, decision, by)
    if spend_link is not None:
        _spend_link_in(connection, request_id, spend_link, now)
    approvers = _approvers_in(runtime, connection, row, decision, values, by, now)
    if approvers is None:  # a partial approval: the quorum is not met yet, the request stays pending
        return None, False
    gone = not waiters.waiter_alive(request_id, row.waiter_instance, row.waiter_seen_epoch)
    notes = _notes_in(connection, row, values, by)
    if (row.required_approvals or 1) > 1:
        values = {**values, "admin_notes": joined_notes(notes)}
    verdict = _Verdict(values, approvers, gone, notes, _proofs_in(connection, row, decision, values, by))
    _set_decided_in(connection, request_id, decision, verdict, now)
    close_in(connection, request_id, now)
    runtime.receipts.append_in(
        connection, "hitl_decided", _decided_payload(request_id, row, decision, verdict, now)
    )
    return None, True


def _spend_link_in(connection: Connection, request_id: str, nonce: str, now: float) -> None:
    """Record a signed link's (or step-up's) nonce as used; one used before is ``hitl_link_invalid``."""
    used = select(hitl_link_uses.c.nonce).where(hitl_link_uses.c.nonce == nonce)
    if connection.execute(used).first() is not None:
        raise link_used(request_id)
    connection.execute(insert(hitl_link_uses).values(nonce=nonce, request_id=request_id, used_at=iso(now)))


def _approvers_in(
    runtime: Runtime,
    connection: Connection,
    row: Any,
    decision: Decision,
    values: dict[str, Any],
    by: str,
    now: float,
) -> list[str] | None:
    """Who the decision is recorded as made by: the decider alone, or for an approval of a quorum every
    approver so far, counted in the transaction; None while fewer than the quorum have approved."""
    if values["status"] != "approved" or (row.required_approvals or 1) <= 1:
        return [by]
    approvers = count_approval(runtime, connection, row, decision, by, now, values["admin_notes"])
    if len(approvers) < row.required_approvals:
        return None
    return approvers


def _proofs_in(
    connection: Connection, row: Any, decision: Decision, values: dict[str, Any], by: str
) -> list[dict[str, Any]]:
    """An approval's proofs: a quorum's, counted in the transaction, or the decider's alone; none for a
    rejection or an answer."""
    if values["status"] != "approved":
        return []
    if (row.required_approvals or 1) > 1:
        return proofs_in(connection, row.id)
    return [{"person": by, "via": decision.via, "assertion": assertion_of(decision)}]


def _notes_in(connection: Connection, row: Any, values: dict[str, Any], by: str) -> list[dict[str, str]]:
    """The decision's notes with who wrote each: on a quorum every approver's (counted in the
    transaction), then a rejecter's own; otherwise the decider's alone."""
    own = [{"by": by, "notes": values["admin_notes"]}] if values["admin_notes"] else []
    if (row.required_approvals or 1) <= 1:
        return own
    earlier = approvers_notes(connection, row.id)
    return earlier if values["status"] == "approved" else [*earlier, *own]


def _set_decided_in(
    connection: Connection, request_id: str, decision: Decision, verdict: _Verdict, now: float
) -> None:
    """Write the decision on the request while it is still pending and unexpired; a request another decider
    committed first is ``hitl_request_already_decided`` (PostgreSQL re-checks the WHERE)."""
    result = connection.execute(
        update(hitl_requests)
        .where(
            hitl_requests.c.id == request_id,
            hitl_requests.c.status == "pending",
            hitl_requests.c.expires_epoch > now,
        )
        .values(
            **verdict.values,
            responded_at=iso(now),
            decided_via=decision.via,
            decided_by=verdict.decided_by,
            waiter_gone=verdict.waiter_gone,
            notes=verdict.notes,
        )
    )
    if result.rowcount != 1:
        raise already_decided(request_id)


def _decided_payload(
    request_id: str, row: Any, decision: Decision, verdict: _Verdict, now: float
) -> dict[str, Any]:
    """What the ``hitl_decided`` receipt records."""
    values = verdict.values
    return {
        "request_id": request_id,
        "kind": row.kind,
        "decision": values["status"],
        "approved": values["approved"],
        "response": values["response"],
        "admin_notes": values["admin_notes"],
        "notes": verdict.notes,
        "via": decision.via,
        "agent": row.agent,
        "decided_by": verdict.decided_by,
        "approvers": verdict.approvers,
        "proofs": verdict.proofs,
        "required_approvals": row.required_approvals or 1,
        "step_up": bool(decision.step_up) if row.step_up else False,
        "waiter_gone": verdict.waiter_gone,
        "responded_at": iso(now),
    }


def expire_in(runtime: Runtime, connection: Connection, request_id: str, now: float) -> int:
    """Expire the request if it is still pending and due (with its ``hitl_expired`` receipt); returns 1 if it
    did, 0 if it was no longer pending or not due."""
    result = connection.execute(
        update(hitl_requests)
        .where(
            hitl_requests.c.id == request_id,
            hitl_requests.c.status == "pending",
            hitl_requests.c.expires_epoch <= now,
        )
        .values(status="expired", approved=False)
    )
    if result.rowcount != 1:
        return 0
    close_in(connection, request_id, now)
    runtime.receipts.append_in(connection, "hitl_expired", {"request_id": request_id, "expired_at": iso(now)})
    return 1


def withdraw_in(runtime: Runtime, connection: Connection, request_id: str, reason: str, now: float) -> bool:
    """Close a pending request as expired with a ``hitl_withdrawn`` receipt, due or not; returns whether it
    was pending."""
    changed = connection.execute(
        update(hitl_requests)
        .where(hitl_requests.c.id == request_id, hitl_requests.c.status == "pending")
        .values(status="expired", approved=False)
    ).rowcount
    if changed:
        close_in(connection, request_id, now)
        runtime.receipts.append_in(
            connection,
            "hitl_withdrawn",
            {"request_id": request_id, "reason": reason, "withdrawn_at": iso(now)},
        )
    return bool(changed)
