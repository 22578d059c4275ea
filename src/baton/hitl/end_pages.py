"""What an end page says: what happened to the request and what the person does next.

A decision's page names who decided and the outcome (a quorum approval says it counted and how many
more are needed); a refusal says that nothing was recorded or approved, why, and the next step (ask for
a new link, log in, let the others decide). Plain sentences: the templates escape them.
"""

from __future__ import annotations

from typing import Any

from baton.errors import BatonError

#: After a refusal: the next step, by error class (every one says what did not happen).
NEXT_STEPS = {
    "hitl_request_expired": "The request expired: nothing was approved. The agent has to ask again.",
    "hitl_link_invalid": "This link cannot decide anything: nothing was approved. Ask for a new link.",
    "hitl_approval_duplicate": (
        "Your approval already counted (a person counts once); nothing more to do until the others decide."
    ),
    "hitl_csrf_invalid": "Nothing was recorded. Open the request again and decide from its page.",
    "hitl_unauthorized": "Nothing was recorded. Log in, then open the request again.",
    "hitl_step_up_required": (
        "Nothing was approved. Log in with your passkey and approve with it; you can still reject."
    ),
    "hitl_owner_excluded": "Nothing was recorded: someone else must decide this request.",
    "hitl_decider_not_authorized": "Nothing was recorded: someone else must decide this request.",
    "hitl_request_not_found": "Nothing was recorded. Go back to the list of pending requests.",
    "hitl_response_invalid": "Nothing was recorded. Go back and choose approve, reject or an answer.",
    "enrollment_link_invalid": "No passkey was registered. Ask for a new enrollment link.",
    "passkey_invalid": "Nothing was recorded. Try your passkey again.",
}


def decided_by(view: dict[str, Any]) -> str:
    """Who decided, as the page names them (an expiry is decided by nobody)."""
    return str(view.get("decided_by") or ("nobody" if view["status"] == "expired" else "someone"))


def outcome(view: dict[str, Any]) -> str:
    """What a decision did: ``approved by alice (1 of 2 counted); 1 more needed`` while a quorum is open,
    else the final status and who decided."""
    rid, status = view["request_id"], view["status"]
    approvals = view.get("approvals") or []
    if status == "pending" and approvals:
        required = int(view.get("required_approvals") or 1)
        left = required - len(approvals)
        more = f"{left} more approval{'s' if left != 1 else ''}"
        return (
            f"Request {rid} is still pending: approved by {approvals[-1]} ({len(approvals)} of "
            f"{required} counted); {more} needed before anything runs."
        )
    return f"Request {rid} is {status}, decided by {decided_by(view)}."


def after(view: dict[str, Any]) -> str:
    """What to do next once a decision was recorded."""
    status = view["status"]
    if status == "pending":
        return "Nothing more to do: the others are asked; you can still reject from the request's page."
    if status in ("approved", "answered"):
        return "Nothing more to do: the agent has the decision."
    return "Nothing was approved; nothing more to do."


def refused(exc: BatonError, view: dict[str, Any] | None = None) -> str:
    """The next step after a refusal; ``already decided by bob: rejected`` when the request was decided."""
    if exc.error_class == "hitl_request_already_decided" and view is not None:
        return (
            f"Already decided by {decided_by(view)}: {view['status']}. What you sent was not recorded; "
            "nothing more to do."
        )
    if exc.error_class == "hitl_request_already_decided":
        return "Someone decided first: what you sent was not recorded; nothing more to do."
    return NEXT_STEPS.get(exc.error_class, "Nothing was recorded.")
