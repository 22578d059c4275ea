"""The gateway's MCP side: the proxy as a dynamic tool source and ``mcp_list_adapters``."""

from __future__ import annotations

from typing import Any

from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry
from baton.gateway.serving.proxy import GatewayProxy


class NoArgs(ToolArgs):
    """No arguments."""


def adapters_view(proxy: GatewayProxy) -> list[dict[str, Any]]:
    """Every adapter baton knows: pinned contract, state, block reason, and for live ones the proxy's view."""
    from baton.gateway.policy.bookkeeping import list_view
    from baton.gateway.policy.snapshot import serving_problem
    from baton.gateway.policy.state import get_adapter, is_live, served_contract

    live = {row["adapter_id"]: row for row in proxy.view()}
    rows = []
    for row in list_view(proxy.runtime):
        stored = get_adapter(proxy.runtime, row["adapter_id"]) or {}
        contract = served_contract(stored)
        entry = {
            "adapter_id": row["adapter_id"],
            "state": row["state"],
            "error_class": row["error_class"],
            "block_reason": row["block_reason"],
            "contract": contract,
            "tool_count": (contract or {}).get("tool_count"),
            "live": False,
        }
        if row["adapter_id"] in live:
            entry.update(live[row["adapter_id"]])
            if entry["blocked"] and entry["state"] != "blocked":
                entry["state"] = "blocked"
        elif stored and is_live(stored):
            entry["not_served_reason"] = (
                serving_problem(proxy.runtime, stored) or "promoted after this server started"
            )
        rows.append(entry)
    return rows


def register(registry: ToolRegistry) -> None:
    """Add the proxy (every live adapter's allowed tools) and ``mcp_list_adapters``."""
    proxy = GatewayProxy(registry.runtime, registry)
    registry.runtime.services["gateway_proxy"] = proxy
    registry.dynamic.append(proxy)
    registry.on_start(proxy.run)

    @registry.tool("mcp_list_adapters", NoArgs, read_only=True, quiet=True)
    async def list_adapters(args: NoArgs, ctx: CallContext) -> dict[str, Any]:
        """List the governed external MCP servers.

        Each adapter shows its pinned contract (server name and version, tool count, hashes), its state
        (promoted adapters are live; blocked ones say why) and its tools."""
        rows = adapters_view(proxy)
        return {"adapters": rows, "count": len(rows)}
