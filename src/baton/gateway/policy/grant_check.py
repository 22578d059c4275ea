"""Whether a person's standing grant covers a gateway call (:mod:`baton.hitl.grants`), and spending it.

Each active grant for this agent, adapter and tool is one Cedar policy; the call's Cedar request is the one
the adapter's call policy sees (:func:`~baton.gateway.policy.cedar_policy.cedar_request`). The first grant
that permits the call, and still has a use when it is spent, covers it; a grant whose policy cannot be
evaluated covers nothing (the call then asks a person, as without grants).
"""

from __future__ import annotations

import logging
from typing import Any

from baton.gateway.policy.cedar_policy import cedar_request
from baton.hitl import grants
from baton.runtime import Runtime

log = logging.getLogger("baton.gateway")


def covering(
    runtime: Runtime, agent: str, adapter_id: str, tool: str, arguments: dict[str, Any], step_up: bool
) -> dict[str, Any] | None:
    """The grant this call spends (what its receipt names), or None: the call asks a person. A call that
    needs a step-up is covered only by a grant made with one."""
    import cedarpy

    found = [g for g in grants.candidates(runtime, agent, adapter_id, tool) if g["step_up"] or not step_up]
    if not found:
        return None
    request = cedar_request(adapter_id, tool, arguments, agent)
    for grant in found:
        try:
            answer = cedarpy.is_authorized(request, grant["policy"], [])
        except Exception:  # an argument Cedar cannot represent: this grant covers nothing
            log.warning("grant %s could not be evaluated for a call of %s", grant["id"], tool)
            continue
        if answer.decision != cedarpy.Decision.Allow or list(answer.diagnostics.errors):
            continue
        use = grants.spend(runtime, grant)
        if use is not None:
            return {
                "grant_id": grant["id"],
                "grant_policy_sha256": grant["policy_sha256"],
                "grant_use": use,
                "grant_max_uses": grant["max_uses"],
                "granted_by": grant["granted_by"],
            }
    return None
