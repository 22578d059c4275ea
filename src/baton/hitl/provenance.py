"""Who asks: what the server itself knows of where a request comes from, never what the agent says.

A request's ``provenance`` is shown to the person deciding it (:mod:`baton.hitl.present`); the asking tools
and the gateway's call approvals (:mod:`baton.gateway.serving.call_approval`) fill it from the call's context.
"""

from __future__ import annotations

from typing import Any

from baton.boundary.toolkit import CallContext


def asked_from(ctx: CallContext) -> dict[str, Any] | None:
    """What the server knows of where a request comes from: the MCP client, and the subagent that asked."""
    found: dict[str, Any] = {}
    if ctx.client:
        found["client"] = ctx.client
    if ctx.on_behalf is not None:
        found["subagent_id"] = ctx.on_behalf.subagent_id
        found["parent_agent"] = ctx.on_behalf.parent_agent
    return found or None
