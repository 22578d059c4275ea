"""An optional extra channel: ask the MCP client's own user via elicitation (off by default).

Enabled with ``BATON_HITL_ELICITATION=true`` and used only when the client declared form elicitation.
It runs beside the other channels, never instead of them: a declined, cancelled, failed or malformed
elicitation leaves the request pending, and only an accepted form with ``approved`` exactly ``true``
approves.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from baton.config import Settings
from baton.errors import BatonError
from baton.hitl.broker import Decision, HitlBroker
from baton.toolkit import CallContext

log = logging.getLogger("baton.hitl")

#: Any non-None value routes the elicitation on the tool call's own stream (see ServerSession.send_request).
_REQUEST_SCOPED = "hitl-call"


def elicitation_wanted(settings: Settings, ctx: CallContext) -> bool:
    """Whether to open the elicitation channel for this call."""
    if not settings.baton_hitl_elicitation or ctx.session is None:
        return False
    capability = getattr(ctx.client_capabilities, "elicitation", None)
    if capability is None:
        return False
    # an empty elicitation capability predates modes and means form
    return capability.form is not None or capability.url is None


def requested_schema(view: dict[str, Any]) -> dict[str, Any]:
    """The form shown to the client's user."""
    if view["kind"] == "approval":
        properties: dict[str, Any] = {
            "approved": {
                "type": "boolean",
                "title": "Approve",
                "description": "true approves, false rejects",
            },
            "admin_notes": {"type": "string", "title": "Notes"},
        }
        return {"type": "object", "properties": properties, "required": ["approved"]}
    answer: dict[str, Any] = {"type": "string", "title": "Answer"}
    if view["options"]:
        answer["enum"] = list(view["options"])
    return {"type": "object", "properties": {"response": answer}, "required": ["response"]}


async def elicit_decision(broker: HitlBroker, view: dict[str, Any], ctx: CallContext) -> None:
    """Ask once; record an accepted, well-formed answer as a decision (the first decision still wins)."""
    text = view["message"]
    if view["context"]:
        text += "\n\nContext:\n" + json.dumps(view["context"], ensure_ascii=False, indent=2)
    try:
        answer = await ctx.session.elicit_form(
            f"[{view['request_id']}] {text}", requested_schema(view), related_request_id=_REQUEST_SCOPED
        )
    except Exception:  # a client that fails to elicit simply leaves the other channels
        log.info("elicitation for %s failed", view["request_id"], exc_info=True)
        return
    if answer.action != "accept" or not isinstance(answer.content, dict):
        return
    content = answer.content
    notes = content.get("admin_notes")
    if view["kind"] == "approval":
        approved = content.get("approved")
        if not isinstance(approved, bool):
            return
        decision = Decision(approved, None, notes if isinstance(notes, str) else None, via="elicitation")
    else:
        response = content.get("response")
        if not isinstance(response, str):
            return
        decision = Decision(response=response, via="elicitation")
    try:
        broker.respond(view["request_id"], decision)
    except BatonError as exc:
        log.info("elicited decision for %s not recorded: %s", view["request_id"], exc.error_class)
