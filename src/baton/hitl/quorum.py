"""Quorum: approvals of a request that needs N distinct people, one row per person in ``hitl_approvals``.

A person counts once (the table's key is the request and the person), and so does an OS account (a CLI
approval records its real uid: one shell cannot approve under several names); every approval before the
Nth is a ``hitl_partial_approval`` receipt, written in the decision's own transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from baton.errors import HitlError
from baton.evidence.canonical import iso
from baton.hitl.records import Decision
from baton.runtime import Runtime
from baton.store.schema import hitl_approvals


def with_approvals(runtime: Runtime, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill ``approvals`` (who approved so far, in order) of the views that need a quorum."""
    ids = [view["request_id"] for view in views if view["required_approvals"] > 1]
    if not ids:
        return views
    query = (
        select(hitl_approvals.c.request_id, hitl_approvals.c.person)
        .where(hitl_approvals.c.request_id.in_(ids))
        .order_by(hitl_approvals.c.approved_at, hitl_approvals.c.person)
    )
    found: dict[str, list[str]] = {}
    with runtime.store.read() as connection:
        for request_id, person in connection.execute(query).all():
            found.setdefault(request_id, []).append(person)
    for view in views:
        view["approvals"] = found.get(view["request_id"], [])
    return views


def count_approval(
    runtime: Runtime,
    connection: Connection,
    row: Any,
    decision: Decision,
    by: str,
    now: float,
    notes: str | None = None,
) -> list[str]:
    """Record one person's approval of a quorum request, with their (redacted) notes; returns every
    approver so far, in order."""
    query = (
        select(hitl_approvals.c.person)
        .where(hitl_approvals.c.request_id == row.id)
        .order_by(hitl_approvals.c.approved_at, hitl_approvals.c.person)
    )
    earlier = list(connection.execute(query).scalars().all())
    if by in earlier:
        raise HitlError(
            "hitl_approval_duplicate",
            f"{by} already approved request {row.id}; a person counts once "
            f"({len(earlier)} of {row.required_approvals}).",
            request_id=row.id,
        )
    _once_per_uid(connection, row, decision, len(earlier))
    connection.execute(
        insert(hitl_approvals).values(
            request_id=row.id,
            person=by,
            via=decision.via,
            approved_at=iso(now),
            admin_notes=notes,
            os_uid=decision.os_uid,
            assertion=assertion_of(decision),
        )
    )
    approvers = [*earlier, by]
    if len(approvers) < row.required_approvals:
        runtime.receipts.append_in(
            connection,
            "hitl_partial_approval",
            {
                "request_id": row.id,
                "decided_by": by,
                "via": decision.via,
                "approvals": len(approvers),
                "required_approvals": row.required_approvals,
                "approvers": approvers,
                "admin_notes": notes,
                "step_up": bool(decision.step_up) if row.step_up else False,
                "assertion": assertion_of(decision),
                "at": iso(now),
            },
        )
    return approvers


def assertion_of(decision: Decision) -> dict[str, Any] | None:
    """The WebAuthn assertion a passkey approval carries (what the receipt records), else None."""
    evidence = getattr(decision.step_up, "evidence", None)
    return dict(evidence) if decision.via == "passkey" and evidence else None


def proofs_in(connection: Connection, request_id: str) -> list[dict[str, Any]]:
    """Each quorum approval so far, in order: who, by which path, and the assertion of a passkey one."""
    query = (
        select(hitl_approvals.c.person, hitl_approvals.c.via, hitl_approvals.c.assertion)
        .where(hitl_approvals.c.request_id == request_id)
        .order_by(hitl_approvals.c.approved_at, hitl_approvals.c.person)
    )
    return [
        {"person": person, "via": via, "assertion": assertion}
        for person, via, assertion in connection.execute(query).all()
    ]


def _once_per_uid(connection: Connection, row: Any, decision: Decision, count: int) -> None:
    """Refuse a CLI approval from an OS account (real uid) that already approved, under whatever name."""
    if decision.os_uid is None:
        return
    query = select(hitl_approvals.c.person).where(
        hitl_approvals.c.request_id == row.id, hitl_approvals.c.os_uid == decision.os_uid
    )
    earlier = connection.execute(query).scalar()
    if earlier is not None:
        raise HitlError(
            "hitl_approval_duplicate",
            f"The OS account uid {decision.os_uid} already approved request {row.id} as {earlier}; an OS "
            f"account counts once ({count} of {row.required_approvals}).",
            request_id=row.id,
        )


def approvers_notes(connection: Connection, request_id: str) -> list[dict[str, str]]:
    """The notes each approver of a quorum wrote so far, in the order they approved (``{by, notes}``)."""
    query = (
        select(hitl_approvals.c.person, hitl_approvals.c.admin_notes)
        .where(hitl_approvals.c.request_id == request_id, hitl_approvals.c.admin_notes.is_not(None))
        .order_by(hitl_approvals.c.approved_at, hitl_approvals.c.person)
    )
    return [{"by": person, "notes": notes} for person, notes in connection.execute(query).all()]


def joined_notes(notes: list[dict[str, str]]) -> str | None:
    """Every decider's notes as one ``admin_notes`` string, each line naming who wrote it."""
    return "\n".join(f"{note['by']}: {note['notes']}" for note in notes) or None
