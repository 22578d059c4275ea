"""Refusals the MCP spec makes protocol errors, not tool results: an unknown or over-long tool name.

The spec answers a ``tools/call`` naming no tool with JSON-RPC error -32602 (invalid params). baton
adds its stable ``error_class`` in the error's ``data``. A name over the cap is refused by
:class:`ToolNameGuard`, the server's outermost middleware, so no span, receipt or metric ever holds it.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from baton.boundary.limits import check_tool_name
from baton.errors import BatonError, ToolNameError


def protocol_error(exc: BatonError) -> MCPError:
    """``exc`` as a JSON-RPC -32602 error whose ``data`` carries ``error_class`` and the details."""
    return MCPError(INVALID_PARAMS, exc.message, data={**exc.details, "error_class": exc.error_class})


class ToolNameGuard:
    """MCP server middleware: a ``tools/call`` whose name is over the cap never reaches anything else."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        """Raise -32602 ``tool_name_too_long`` before the SDK's span, the handler, receipts or metrics."""
        params = getattr(ctx, "params", None)
        if getattr(ctx, "method", None) == "tools/call" and isinstance(params, dict):
            try:
                check_tool_name(params.get("name"))
            except ToolNameError as exc:
                raise protocol_error(exc) from None
        return await call_next(ctx)
