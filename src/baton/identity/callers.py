"""Who an MCP caller is, as far as deciding goes: the admin mark an HTTP credential puts on a request, and
the decision authority the tool boundary derives from it.

Its own small module so that the HTTP middleware (:mod:`baton.wire.http_serve`, :mod:`baton.http.oauth`) and the tools
that read the mark (:mod:`baton.hitl.tasks_input`) import it, and none of them imports another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.config import Settings

#: Key in the ASGI scope's ``state`` marking a request authenticated with the admin credential.
ADMIN_SCOPE_KEY = "baton_admin"


def decision_authority(settings: Settings, request: Any) -> str | None:
    """How an MCP caller may decide HITL requests: ``mcp`` (opt-in), ``mcp_admin`` (admin credential), or None.

    By default nobody over MCP may decide: the agent that asks must not be the one that approves.
    """
    if settings.baton_hitl_allow_mcp_decisions:
        return "mcp"
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and scope.get("state", {}).get(ADMIN_SCOPE_KEY) is True:
        return "mcp_admin"
    return None
