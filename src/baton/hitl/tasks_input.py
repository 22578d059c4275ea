"""Answers to a task's ``inputRequests`` (``tasks/update``) for a task that waits on a human request.

A URL elicitation's answer decides nothing: the person decides in the browser. A form answer arrives over
an MCP method like ``mcp_respond_to_request``, so it follows the same authority rule: it is recorded only
for a caller with decision authority (``BATON_HITL_ALLOW_MCP_DECISIONS=1`` or the HTTP admin token), with
that authority as ``decided_via``, and only on the caller's own *input* request without a quorum or
step-up (an approval is never decided by a form); without that authority the update is refused with
``hitl_decider_not_authorized`` and the request stays pending.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from baton.errors import BatonError
from baton.hitl.broker import get_broker
from baton.hitl.mrtr import decision_from_answer


async def apply_task_answers(
    registry: Any, ctx: Any, row: dict[str, Any], outstanding: dict[str, Any], answered: dict[str, Any]
) -> None:
    """Record the decisions that the answered form elicitations carry (the first decision still wins)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    from baton.boundary.toolkit import CallContext
    from baton.hitl.elicit import may_elicit
    from baton.identity.agents import current_agent
    from baton.identity.callers import decision_authority

    runtime = registry.runtime
    caller = CallContext(agent=current_agent(ctx, runtime.settings))
    broker = get_broker(runtime)
    for key, answer in answered.items():
        if outstanding[key].get("params", {}).get("mode", "form") != "form" or not row["request_id"]:
            continue
        decider = decision_authority(runtime.settings, getattr(ctx, "request", None))
        if decider is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message="This MCP caller may not decide human-in-the-loop requests; the request is still pending.",
                data={"error_class": "hitl_decider_not_authorized", "request_id": row["request_id"]},
            )
        answer = answer if isinstance(answer, dict) else {}
        view = broker.get(row["request_id"])
        if not may_elicit(view, caller, "form"):
            continue  # an approval, another agent's request, or one that needs a quorum or a step-up
        decision = decision_from_answer(view, str(answer.get("action", "")), answer.get("content"))
        if decision is None:
            continue
        try:
            broker.respond(row["request_id"], dataclasses.replace(decision, via=decider))
        except BatonError:
            continue  # already decided or expired: the first decision stands
