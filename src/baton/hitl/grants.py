"""Standing grants: a person lets an agent call one adapter's tool again, within limits, without asking.

Approval fatigue is real: a person who approved ``db__transfer`` to bob may allow the same agent the same
tool for the next N minutes, at most M times, optionally only for arguments matching a Cedar condition.
A grant is made only from an approved gateway request, only by a person (a passkey or the CLI's OS
account: the paths that name someone), never for a tool that needs a quorum, and for a step-up tool only
with a step-up. It compiles into one Cedar policy over the same request the adapter's call policy sees
(principal ``Agent::"…"``, action ``Action::"<tool>"``, resource ``Adapter::"<id>"``, ``context.arguments``),
pinned by sha256. Created and revoked grants get receipts; every call a grant covers names it in its
``gateway_call`` receipt (:mod:`baton.gateway.policy.grant_check`). Expiry and the use count are checked
in the same statement that spends a use.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from baton import clock
from baton.errors import ArgumentError, HitlError
from baton.evidence.canonical import iso
from baton.runtime import Runtime
from baton.store.schema import hitl_grants

#: The paths that name a person: a grant is a person's act, like a decision.
GRANTING_PATHS = frozenset({"passkey", "cli"})
MAX_SECONDS = 24 * 3600
MAX_USES = 1000
MAX_CONDITION_CHARS = 2000


@dataclass(frozen=True)
class GrantAsk:
    """What a person asks for: how long, how many calls, and an optional Cedar condition."""

    seconds: int
    uses: int = 10
    condition: str | None = None


def entity(kind: str, name: str) -> str:
    """A Cedar entity reference with ``name`` escaped as a Cedar (JSON-compatible) string."""
    return f"{kind}::{json.dumps(name)}"


def compile_policy(grant_id: str, agent: str, adapter_id: str, tool: str, condition: str | None) -> str:
    """The one Cedar policy a grant is: this agent, this tool of this adapter, when the condition holds."""
    head = (
        f'@id("grant {grant_id}")\n'
        f"permit(principal == {entity('Agent', agent)}, action == {entity('Action', tool)}, "
        f"resource == {entity('Adapter', adapter_id)})"
    )
    return f"{head}\nwhen {{ {condition} }};\n" if condition else f"{head};\n"


def _check_policy(text: str) -> None:
    """The compiled text must parse and hold exactly one policy (a condition cannot smuggle in another)."""
    import cedarpy

    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except Exception as exc:  # cedarpy raises ValueError/RuntimeError variants for a bad policy
        raise ArgumentError(
            "invalid_arguments", f"The grant's condition is not valid Cedar: {str(exc)[:300]}"
        ) from None
    if len(parsed.get("staticPolicies") or {}) != 1 or parsed.get("templates"):
        raise ArgumentError("invalid_arguments", "A grant's condition is one Cedar expression, not policies.")


def _check_ask(ask: GrantAsk) -> None:
    if not 1 <= ask.seconds <= MAX_SECONDS:
        raise ArgumentError(
            "invalid_arguments", f"A grant lasts from 1 second to {MAX_SECONDS // 3600} hours."
        )
    if not 1 <= ask.uses <= MAX_USES:
        raise ArgumentError("invalid_arguments", f"A grant covers from 1 to {MAX_USES} calls.")
    if ask.condition is not None and not 0 < len(ask.condition) <= MAX_CONDITION_CHARS:
        raise ArgumentError("invalid_arguments", f"A condition has 1 to {MAX_CONDITION_CHARS} characters.")


def check(
    view: dict[str, Any], ask: GrantAsk, via: str, stepped_up: bool = False, decided: bool = True
) -> None:
    """Everything a grant from ``view`` needs, checked before anything is decided or stored (``decided``
    false: the request is still pending, and the person approves it together with the grant)."""
    _check_ask(ask)
    adapter_id, tool = _grantable(view, via, stepped_up, decided)
    _check_policy(compile_policy("gr_check", str(view["agent"]), adapter_id, tool, ask.condition))


def _grantable(view: dict[str, Any], via: str, stepped_up: bool, decided: bool = True) -> tuple[str, str]:
    """The adapter and tool of an approved gateway request a person may grant from; raises otherwise."""
    context = view.get("context") or {}
    adapter_id, tool = context.get("adapter_id"), context.get("tool")
    request_id = view["request_id"]
    if via not in GRANTING_PATHS:
        raise HitlError(
            "hitl_decider_not_authorized",
            f"Only a person grants (a passkey or the CLI), not {via}.",
            request_id=request_id,
        )
    if not isinstance(adapter_id, str) or not isinstance(tool, str) or not view.get("agent"):
        raise ArgumentError(
            "invalid_arguments", f"Request {request_id} is not a gateway tool call: nothing to grant."
        )
    if view["status"] != ("approved" if decided else "pending"):
        raise ArgumentError(
            "invalid_arguments", f"Request {request_id} is {view['status']}; grant from an approval."
        )
    if int(view.get("required_approvals") or 1) > 1:
        raise ArgumentError(
            "invalid_arguments",
            f"{tool} needs {view['required_approvals']} people each time: one person cannot grant it.",
        )
    if view.get("step_up") and not stepped_up:
        raise HitlError(
            "hitl_step_up_required",
            f"{tool} is high-risk: granting it needs a fresh passkey step-up (the request page).",
            request_id=request_id,
        )
    return adapter_id, tool


def create(
    runtime: Runtime, view: dict[str, Any], ask: GrantAsk, granted_by: str, via: str, stepped_up: bool = False
) -> dict[str, Any]:
    """A grant from an approved gateway request (and its ``hitl_grant_created`` receipt, in one transaction)."""
    _check_ask(ask)
    adapter_id, tool = _grantable(view, via, stepped_up)
    grant_id = f"gr_{uuid.uuid4().hex[:20]}"
    agent = str(view["agent"])
    policy = compile_policy(grant_id, agent, adapter_id, tool, ask.condition)
    _check_policy(policy)
    now = clock.time()
    row = {
        "id": grant_id,
        "agent": agent,
        "adapter_id": adapter_id,
        "tool": tool,
        "condition": ask.condition,
        "policy": policy,
        "policy_sha256": hashlib.sha256(policy.encode()).hexdigest(),
        "max_uses": ask.uses,
        "uses": 0,
        "created_at": iso(now),
        "expires_at": iso(now + ask.seconds),
        "expires_epoch": now + ask.seconds,
        "granted_by": granted_by,
        "granted_via": via,
        "request_id": view["request_id"],
        "step_up": stepped_up,
    }
    receipt = {key: row[key] for key in row if key not in ("uses", "expires_epoch")}
    with runtime.store.write() as connection:
        connection.execute(insert(hitl_grants).values(**row))
        runtime.receipts.append_in(connection, "hitl_grant_created", {"grant_id": grant_id, **receipt})
    return shown(row, now)


def revoke(runtime: Runtime, grant_id: str, revoked_by: str) -> dict[str, Any]:
    """Revoke a grant (its ``hitl_grant_revoked`` receipt in the same transaction); once is enough."""
    now = clock.time()
    statement = (
        update(hitl_grants)
        .where(hitl_grants.c.id == grant_id, hitl_grants.c.revoked_at.is_(None))
        .values(revoked_at=iso(now), revoked_by=revoked_by)
    )
    with runtime.store.write() as connection:
        if connection.execute(statement).rowcount != 1:
            found = connection.execute(select(hitl_grants.c.id).where(hitl_grants.c.id == grant_id)).first()
            raise ArgumentError(
                "invalid_arguments",
                f"Grant {grant_id} was already revoked." if found else f"No grant has the id {grant_id!r}.",
            )
        runtime.receipts.append_in(
            connection, "hitl_grant_revoked", {"grant_id": grant_id, "revoked_by": revoked_by}
        )
    return get(runtime, grant_id)


def get(runtime: Runtime, grant_id: str) -> dict[str, Any]:
    """One grant as listed."""
    with runtime.store.read() as connection:
        row = connection.execute(select(hitl_grants).where(hitl_grants.c.id == grant_id)).first()
    if row is None:
        raise ArgumentError("invalid_arguments", f"No grant has the id {grant_id!r}.")
    return shown(row._asdict(), clock.time())


def listed(runtime: Runtime, include_ended: bool = False) -> list[dict[str, Any]]:
    """The grants, newest first: the active ones, or every one with ``include_ended``."""
    now = clock.time()
    with runtime.store.read() as connection:
        rows = connection.execute(select(hitl_grants).order_by(hitl_grants.c.created_at.desc())).all()
    grants = [shown(row._asdict(), now) for row in rows]
    return grants if include_ended else [g for g in grants if g["status"] == "active"]


def candidates(runtime: Runtime, agent: str, adapter_id: str, tool: str) -> list[dict[str, Any]]:
    """The active grants that could cover this agent's call of this tool, oldest first."""
    now = clock.time()
    query = select(hitl_grants).where(
        hitl_grants.c.agent == agent,
        hitl_grants.c.adapter_id == adapter_id,
        hitl_grants.c.tool == tool,
        hitl_grants.c.revoked_at.is_(None),
        hitl_grants.c.expires_epoch > now,
        hitl_grants.c.uses < hitl_grants.c.max_uses,
    )
    with runtime.store.read() as connection:
        return [row._asdict() for row in connection.execute(query.order_by(hitl_grants.c.created_at)).all()]


def spend(runtime: Runtime, grant: dict[str, Any]) -> int | None:
    """Spend one use of ``grant`` if it is still active (one statement: no two calls share the last use);
    the use's number, or None when it ran out, expired or was revoked meanwhile."""
    now = clock.time()
    statement = (
        update(hitl_grants)
        .where(
            hitl_grants.c.id == grant["id"],
            hitl_grants.c.revoked_at.is_(None),
            hitl_grants.c.expires_epoch > now,
            hitl_grants.c.uses < hitl_grants.c.max_uses,
        )
        .values(uses=hitl_grants.c.uses + 1)
    )
    with runtime.store.write() as connection:
        if connection.execute(statement).rowcount != 1:
            return None
        used = connection.execute(select(hitl_grants.c.uses).where(hitl_grants.c.id == grant["id"])).scalar()
    return int(used or 0)


def shown(row: dict[str, Any], now: float) -> dict[str, Any]:
    """A grant for people and agents: its status (active, used_up, expired, revoked), never its policy text."""
    if row.get("revoked_at"):
        status = "revoked"
    elif row["uses"] >= row["max_uses"]:
        status = "used_up"
    elif row["expires_epoch"] <= now:
        status = "expired"
    else:
        status = "active"
    keys = ("agent", "adapter_id", "tool", "condition", "policy_sha256", "max_uses", "uses", "created_at")
    more = ("expires_at", "granted_by", "granted_via", "request_id", "step_up", "revoked_at", "revoked_by")
    return {"grant_id": row["id"], "status": status, **{key: row.get(key) for key in keys + more}}
