"""Creating a request: the checks before anything is stored, then one transaction that stores it.

The checks settle the request's timeout, its quorum and step-up and its escalation steps (an unknown
person named in a step is refused here); the transaction checks the asking agent's cap of open requests,
inserts the request and its steps' timers and appends its ``hitl_requested`` receipt. Waking the timer
scheduler and announcing the request are the broker's (:meth:`baton.hitl.broker.HitlBroker.create`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select

from baton import clock
from baton.errors import ArgumentError, HitlError
from baton.escalation_steps import PlannedStep, StepSyntaxError, parse_steps, plan
from baton.evidence.canonical import iso
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.hitl.escalation import schedule_in
from baton.hitl.pending_page import PENDING
from baton.hitl.records import MAX_TIMEOUT_SECONDS, NewRequest
from baton.runtime import Runtime
from baton.store.schema import hitl_requests

_OPEN_OF_AGENT = select(func.count()).where(
    PENDING, hitl_requests.c.agent == bindparam("agent"), hitl_requests.c.expires_epoch > bindparam("now")
)


@dataclass(frozen=True)
class StoredRequest:
    """A request just stored: its id and what its receipt records of its escalation steps (empty: none)."""

    request_id: str
    steps: list[dict[str, Any]]


@dataclass(frozen=True)
class _Rules:
    """What the checks settle for a new request before anything is stored."""

    timeout: int
    required_approvals: int
    step_up: bool
    #: BATON_HITL_ESCALATION's steps, then the request's own, on the request's clock.
    planned: list[PlannedStep]


def store_request(runtime: Runtime, new: NewRequest) -> StoredRequest:
    """Check a new request, then store it, its steps' timers and its ``hitl_requested`` receipt in one
    transaction (refused past the asking agent's cap of open requests)."""
    rules = _rules(runtime, new)
    request_id = f"hr_{uuid.uuid4().hex[:20]}"
    now = clock.time()
    row = _row(runtime, new, rules, request_id, now)
    with runtime.store.write() as connection:
        if new.agent is not None:
            _check_cap(runtime, connection, new.agent, now)
        connection.execute(insert(hitl_requests).values(**row))
        steps = schedule_in(connection, runtime, request_id, rules.planned, now)
        runtime.receipts.append_in(connection, "hitl_requested", _requested_payload(new, rules, row, steps))
    return StoredRequest(request_id, steps)


def _rules(runtime: Runtime, new: NewRequest) -> _Rules:
    """The request's timeout (``invalid_arguments`` out of bounds), quorum, step-up and escalation steps."""
    timeout = new.timeout_seconds or runtime.settings.hitl_timeout_seconds
    if not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
        raise ArgumentError(
            "invalid_arguments",
            f"The timeout (timeout_seconds, or HITL_TIMEOUT_SECONDS when none is given) must be "
            f"between 1 and {MAX_TIMEOUT_SECONDS} seconds.",
        )
    required, step_up = _quorum_and_step_up(runtime, new)
    return _Rules(timeout, required, step_up, _plan_steps(runtime, new, timeout))


def _quorum_and_step_up(runtime: Runtime, new: NewRequest) -> tuple[int, bool]:
    """The request's quorum (within BATON_HITL_MAX_REQUIRED_APPROVALS) and whether it needs step-up."""
    if new.kind != "approval":
        return 1, False
    cap = runtime.settings.baton_hitl_max_required_approvals
    required = new.required_approvals or 1
    if not 1 <= required <= cap:
        raise ArgumentError(
            "invalid_arguments",
            f"required_approvals must be between 1 and {cap} (BATON_HITL_MAX_REQUIRED_APPROVALS).",
        )
    return required, bool(new.step_up or runtime.settings.baton_hitl_step_up)


def _plan_steps(runtime: Runtime, new: NewRequest, timeout: int) -> list[PlannedStep]:
    """The request's escalation steps (BATON_HITL_ESCALATION's, then its own) on its clock; a malformed
    or impossible step of its own is ``invalid_arguments``. A ``person:NAME`` is not looked up here: whether
    a person exists is not the agent's to learn (the step's receipt says it could not be delivered)."""
    try:
        requested = parse_steps(new.escalation)
        return plan(runtime.settings.escalation_steps, requested, timeout)
    except StepSyntaxError as exc:
        raise ArgumentError("invalid_arguments", f"escalation: {exc}") from None


def _row(runtime: Runtime, new: NewRequest, rules: _Rules, request_id: str, now: float) -> dict[str, Any]:
    """The request's row: its texts redacted, pending until ``timeout`` seconds from ``now``."""
    redact = runtime.redactor
    context = redact.value(new.context) if new.context is not None else None
    digest = new.arguments_sha256 or sha256_hex(canonical_json(context))
    return {
        "id": request_id,
        "kind": new.kind,
        "message": redact.text(new.message),
        "context": context,
        "options": redact.value(new.options) if new.options is not None else None,
        "urgent": new.urgent,
        "status": "pending",
        "created_at": iso(now),
        "expires_at": iso(now + rules.timeout),
        "expires_epoch": now + rules.timeout,
        "owner": runtime.instance_id,
        "agent": new.agent,
        "required_approvals": rules.required_approvals,
        "step_up": rules.step_up,
        "arguments_sha256": digest,
        "provenance": redact.value(new.provenance) if new.provenance else None,
    }


def _check_cap(runtime: Runtime, connection: Connection, agent: str, now: float) -> None:
    """Refuse a request past the agent's cap of open requests (``hitl_too_many_pending``)."""
    cap = runtime.settings.baton_hitl_max_pending_per_agent
    open_count = int(connection.execute(_OPEN_OF_AGENT, {"agent": agent, "now": now}).scalar_one())
    if open_count >= cap:
        raise HitlError(
            "hitl_too_many_pending",
            f"You already have {open_count} open requests (at most {cap}); wait for a person to "
            "decide some, or for them to expire, before asking again.",
            pending=open_count,
            limit=cap,
        )


def _requested_payload(
    new: NewRequest, rules: _Rules, row: dict[str, Any], steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the ``hitl_requested`` receipt records."""
    return {
        "request_id": row["id"],
        "kind": new.kind,
        "message": row["message"],
        "context_sha256": sha256_hex(canonical_json(row["context"])),
        "options": row["options"],
        "urgent": new.urgent,
        "timeout_seconds": rules.timeout,
        "required_approvals": rules.required_approvals,
        "step_up": rules.step_up,
        "arguments_sha256": row["arguments_sha256"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "agent": new.agent,
        "provenance": row["provenance"],
        "escalation": steps,
        **(_bound_arguments(row) if new.kind == "approval" else {}),
    }


def _bound_arguments(row: dict[str, Any]) -> dict[str, Any]:
    """``{"arguments": ...}`` of an approval: what ``arguments_sha256`` is the digest of (a gateway call's
    arguments, else the context), so a verifier checks the signed hash against it; nothing when neither hashes
    to it (a redacted credential changed the arguments, or the caller gave its own digest)."""
    context = row["context"]
    candidates = [context.get("arguments")] if isinstance(context, dict) and "arguments" in context else []
    for candidate in [*candidates, context]:
        if sha256_hex(canonical_json(candidate)) == row["arguments_sha256"]:
            return {"arguments": candidate}
    return {}
