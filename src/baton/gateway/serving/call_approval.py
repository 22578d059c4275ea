"""The single-use, argument-bound human approval a risky gateway call waits for, and the check that it
still holds just before the upstream call."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import desc, select

from baton import clock
from baton.errors import GatewayError, HitlError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.store.schema import receipts

if TYPE_CHECKING:
    from baton.boundary.toolkit import CallContext, OnBehalf
    from baton.gateway.policy.policy import Policy
    from baton.hitl.broker import HitlBroker
    from baton.hitl.records import NewRequest
    from baton.runtime import Runtime


class Adapter(Protocol):
    """What an approval needs of a live adapter (the proxy's :class:`baton.gateway.serving.proxy.Adapter` has it)."""

    id: str
    policy: Policy
    definitions: dict[str, dict[str, Any]]


async def approve(
    runtime: Runtime,
    consumed: set[str],
    adapter: Adapter,
    tool: str,
    proxied_name: str,
    arguments: dict[str, Any],
    context: CallContext,
    asked: int = 0,
) -> dict[str, Any]:
    """A single-use HITL approval bound to sha256(canonical arguments); raises unless approved.

    ``asked`` is the call policy's ``@approvals("N")``: the request needs the larger of it and the TOML's
    ``tools.required_approvals`` distinct people, and one above the operator's cap refuses the call
    rather than letting fewer approve it. ``consumed`` is the proxy's set of request ids already used
    (an approval is spent once); ``proxied_name`` is the tool's ``{adapter_id}__{tool}`` name."""
    from baton.hitl.broker import get_broker

    digest = sha256_hex(canonical_json(arguments))
    broker = get_broker(runtime)
    view = await broker.create(_approval_request(runtime, adapter, tool, arguments, digest, context, asked))
    decided = await _wait_for_decision(broker, view, context)
    request_id = view["request_id"]
    _spend_once(consumed, request_id)
    return _granted_or_refused(runtime, request_id, digest, decided, proxied_name)


def granted(
    runtime: Runtime,
    adapter: Adapter,
    tool: str,
    arguments: dict[str, Any],
    context: CallContext,
    asked: int,
    path_escapes: bool = False,
) -> dict[str, Any] | None:
    """The standing grant that covers this call (:mod:`baton.gateway.policy.grant_check`), when one person's
    approval would do: a call that needs a quorum always asks its people, a subagent's call always asks (it
    names the subagent, whose authority a grant to its parent does not carry), and so does a call whose
    path leaves its root (:mod:`baton.gateway.policy.paths`)."""
    from baton.gateway.policy.grant_check import covering

    if context.on_behalf is not None or path_escapes:
        return None
    if (required_approvals(runtime, adapter, tool, asked) or 1) > 1:
        return None
    step_up = needs_step_up(runtime.settings.baton_hitl_step_up_risk, adapter.policy, tool)
    return covering(runtime, context.agent.name, adapter.id, tool, arguments, step_up)


def _approval_request(
    runtime: Runtime,
    adapter: Adapter,
    tool: str,
    arguments: dict[str, Any],
    digest: str,
    context: CallContext,
    asked: int,
) -> NewRequest:
    """The approval request for this call: the question, the quorum and step-up the policy asks, and who
    asks; a quorum above the operator's cap raises before anything is stored."""
    from baton.hitl.records import NewRequest

    message, request_context = _question(adapter, tool, arguments, digest, context.on_behalf)
    tools = adapter.policy.tools
    required = required_approvals(runtime, adapter, tool, asked)
    return NewRequest(
        "approval",
        message,
        request_context,
        tools.approval_timeout_seconds,
        required_approvals=required,
        step_up=needs_step_up(runtime.settings.baton_hitl_step_up_risk, adapter.policy, tool),
        arguments_sha256=digest,
        agent=context.agent.name,
        provenance=_provenance(adapter, tool, context),
    )


def _question(
    adapter: Adapter, tool: str, arguments: dict[str, Any], digest: str, on_behalf: OnBehalf | None
) -> tuple[str, dict[str, Any]]:
    """What the human is asked and the context shown with it: the exact arguments and their digest, and
    the subagent that asks, if one does."""
    message = f"Allow adapter {adapter.id} to run its tool {tool} with exactly these arguments?"
    request_context: dict[str, Any] = {
        "adapter_id": adapter.id,
        "tool": tool,
        "arguments": arguments,
        "arguments_sha256": digest,
    }
    if on_behalf is not None:
        message = (
            f"Subagent {on_behalf.subagent_id} (spawned by {on_behalf.parent_agent}) asks: allow adapter "
            f"{adapter.id} to run its tool {tool} with exactly these arguments?"
        )
        request_context["subagent_id"] = on_behalf.subagent_id
        request_context["parent_agent"] = on_behalf.parent_agent
    return message, request_context


def _provenance(adapter: Adapter, tool: str, context: CallContext) -> dict[str, Any]:
    """Who asks and what is at risk, from what the server knows (never from the agent's arguments)."""
    from baton.hitl.provenance import asked_from

    return {
        **(asked_from(context) or {}),
        "adapter_id": adapter.id,
        "tool": tool,
        "risk_class": adapter.policy.adapter.risk_class,
        "annotations": (adapter.definitions.get(tool) or {}).get("annotations") or {},
    }


async def _wait_for_decision(
    broker: HitlBroker, view: dict[str, Any], context: CallContext
) -> dict[str, Any]:
    """Wait for the humans' outcome (a timeout raises ``hitl_timeout``), telling a subagent which request
    it waits on and when it stops; a subagent's wait that raises withdraws the request."""
    from baton.hitl.waiting import classic_elicitation, reached, wait_for_outcome

    view = reached(broker, view, context, classic_elicitation(broker, view, context), resumable=False)
    on_behalf = context.on_behalf
    if on_behalf is not None and on_behalf.waiting is not None:
        on_behalf.waiting(view["request_id"])
    try:
        return await wait_for_outcome(broker, view, context, None, clock.time())
    except BaseException:
        if on_behalf is not None:  # the subagent was cancelled: nobody will act on a decision
            broker.withdraw(view["request_id"], f"subagent {on_behalf.subagent_id} was cancelled")
        raise
    finally:
        if on_behalf is not None and on_behalf.waiting is not None:
            on_behalf.waiting(None)


def _spend_once(consumed: set[str], request_id: str) -> None:
    """Mark the request's approval used, refusing one already used: an approval lets one call through."""
    if request_id in consumed:
        raise HitlError(
            "approval_denied", f"The approval {request_id} was already used.", request_id=request_id
        )
    consumed.add(request_id)


def _granted_or_refused(
    runtime: Runtime, request_id: str, digest: str, decided: dict[str, Any], proxied_name: str
) -> dict[str, Any]:
    """The approval, linked to its decision receipt, when the humans approved; a rejection raises
    ``approval_denied`` carrying that same record."""
    approval = {
        "request_id": request_id,
        "arguments_sha256": digest,
        **decision_receipt(runtime, request_id),
    }
    if not decided.get("approved"):
        raise HitlError(
            "approval_denied",
            f"The human rejected {proxied_name}; nothing was sent upstream.",
            request_id=request_id,
            admin_notes=decided.get("admin_notes"),
            approval=approval,
        )
    return approval


def still_valid(
    runtime: Runtime, approval: dict[str, Any], arguments: dict[str, Any], context: CallContext
) -> None:
    """Re-read the approval from the store just before the upstream call: it must still be an explicit
    approval, decided before it expired, of this agent's request for exactly these arguments."""
    from datetime import datetime

    from baton.hitl.broker import get_broker

    request_id = approval["request_id"]
    view = get_broker(runtime).get(request_id)
    request_context = view.get("context") or {}
    digest = sha256_hex(canonical_json(arguments))
    decided_in_time = bool(view["responded_at"]) and datetime.fromisoformat(
        view["responded_at"]
    ) < datetime.fromisoformat(view["expires_at"])
    checks = {
        "approved": view["status"] == "approved" and view["approved"] is True,
        "arguments": request_context.get("arguments_sha256") == digest == approval["arguments_sha256"],
        "in_time": decided_in_time,
        "agent": context.agent.owns(view.get("agent")),
    }
    failed = sorted(name for name, ok in checks.items() if not ok)
    if failed:
        raise HitlError(
            "approval_denied",
            f"The approval {request_id} is not valid for this call ({', '.join(failed)}); nothing was sent "
            "upstream.",
            request_id=request_id,
            failed_checks=failed,
        )


def decision_receipt(runtime: Runtime, request_id: str) -> dict[str, Any]:
    """seq and sha256 of the ``hitl_decided`` receipt of ``request_id``."""
    query = select(receipts.c.seq, receipts.c.sha256, receipts.c.payload).where(
        receipts.c.kind == "hitl_decided"
    )
    with runtime.store.read() as connection:
        for seq, sha, payload in connection.execute(query.order_by(desc(receipts.c.seq)).limit(200)):
            data = payload if isinstance(payload, dict) else json.loads(payload)
            if data.get("request_id") == request_id:
                return {"decision_receipt_seq": seq, "decision_receipt_sha256": sha}
    return {"decision_receipt_seq": None, "decision_receipt_sha256": None}


def required_approvals(runtime: Runtime, adapter: Adapter, tool: str, asked: int) -> int | None:
    """How many distinct people approve a call: the most of the call policy's and the TOML's numbers."""
    configured = adapter.policy.tools.required_approvals.get(tool)
    needed = max(configured or 1, asked)
    cap = runtime.settings.baton_hitl_max_required_approvals
    if needed > cap:
        raise GatewayError(
            "gateway_policy_error",
            f"The policy of adapter {adapter.id} asks {needed} approvals for {tool}, above the operator's cap "
            f"(BATON_HITL_MAX_REQUIRED_APPROVALS={cap}); the call is refused rather than approved by fewer.",
            adapter_id=adapter.id,
            tool=tool,
            required_approvals=needed,
        )
    return needed if needed > 1 else configured


def needs_step_up(risk_classes: str | None, policy: Any, tool: str) -> bool:
    """Whether approving a call of ``tool`` needs a passkey step-up: the policy lists the tool under
    ``tools.step_up``, or the adapter's ``risk_class`` is one of BATON_HITL_STEP_UP_RISK (e.g. ``high``)."""
    classes = {part.strip() for part in (risk_classes or "").split(",") if part.strip()}
    return tool in policy.tools.step_up or policy.adapter.risk_class in classes
