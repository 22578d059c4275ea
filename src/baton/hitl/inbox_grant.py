"""A standing grant made on the request page: "Approve and allow this agent this tool for…".

Only a person logged in with a passkey is offered one (a signed link's holder and the operator's token name
nobody), only for a pending gateway call that one person may approve (not a quorum's, not a subagent's).
The grant is checked before the approval is recorded (:func:`baton.hitl.grants.check`) and made right after
it, by the person the decision names, with ``stepped_up`` only when this same form post carried a verified
step-up: a high-risk tool's grant needs the step-up as its decision does.
"""

from __future__ import annotations

from typing import Any

from baton.errors import ArgumentError, HitlError
from baton.hitl import grants
from baton.hitl.broker import Decision, HitlBroker
from baton.hitl.inbox_access import Principal
from baton.runtime import Runtime

#: The durations the page offers, by the form's ``grant_for`` value (seconds).
DURATIONS = {"900": "15 min", "3600": "1 h", "28800": "8 h"}
DEFAULT_USES = 10
#: The form's action for an approval that also makes a grant.
ACTION = "approve_grant"


def offered(view: dict[str, Any], via: str | None) -> dict[str, Any] | None:
    """What the page offers for ``view`` to someone logged in ``via`` (None: no grant option at all)."""
    context = view.get("context") or {}
    provenance = view.get("provenance") or {}
    if (
        via != "passkey"
        or view.get("kind") != "approval"
        or view.get("status") != "pending"
        or not isinstance(context.get("adapter_id"), str)
        or not isinstance(context.get("tool"), str)
        or not view.get("agent")
        or context.get("subagent_id")
        or provenance.get("subagent_id")
        or int(view.get("required_approvals") or 1) > 1
    ):
        return None
    return {"durations": DURATIONS, "uses": DEFAULT_USES, "max_uses": grants.MAX_USES, "action": ACTION}


def ask_of(fields: dict[str, str]) -> grants.GrantAsk:
    """The grant the form asks for: one of the offered durations, a use count, an optional condition."""
    seconds = fields.get("grant_for", "")
    if seconds not in DURATIONS:
        raise ArgumentError("invalid_arguments", "A grant from the page lasts 15 min, 1 h or 8 h.")
    try:
        uses = int(fields.get("grant_uses", "") or DEFAULT_USES)
    except ValueError:
        raise ArgumentError("invalid_arguments", "A grant's call count is a whole number.") from None
    condition = fields.get("grant_when", "").strip() or None
    return grants.GrantAsk(int(seconds), uses, condition)


def check_offered(view: dict[str, Any], via: str, ask: grants.GrantAsk, stepped_up: bool) -> None:
    """Refuse, before anything is decided, a grant the page would not have offered or could not make."""
    if via != "passkey":
        raise HitlError(
            "hitl_decider_not_authorized",
            "A standing grant is made by a person logged in with a passkey.",
            request_id=view["request_id"],
        )
    if offered(view, via) is None:
        raise ArgumentError(
            "invalid_arguments",
            f"Request {view['request_id']} offers no standing grant (a pending call one person approves).",
        )
    grants.check(view, ask, "passkey", stepped_up, decided=False)


def approve(
    runtime: Runtime,
    broker: HitlBroker,
    request_id: str,
    who: Principal,
    decision: Decision,
    fields: dict[str, str],
) -> dict[str, Any]:
    """Record ``who``'s approval and make the grant the form asks for (checked first: a grant that could not
    be made refuses before anything is decided); the grant as listed."""
    ask = ask_of(fields)
    stepped_up = decision.step_up is not None
    check_offered(broker.get(request_id), who.via, ask, stepped_up)
    view = broker.respond(request_id, decision)
    return grants.create(runtime, view, ask, who.name, "passkey", stepped_up)
