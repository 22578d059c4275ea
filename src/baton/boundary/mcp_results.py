"""A tool registry's result as MCP: a ``CallToolResult`` with baton's JSON as structured content, or the
interim ``InputRequiredResult`` of a multi-round-trip call.

Used by the server's ``tools/call`` handler and by the Tasks extension (:mod:`baton.tasks.extension`), which imports
this module rather than the server.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types


def tool_result(result: dict[str, Any]) -> dict[str, Any] | types.InputRequiredResult:
    """A registry result as MCP: a ``CallToolResult`` in its wire form (JSON text, or a proxied upstream's
    own content blocks, ``mcp_content``), or the interim ``InputRequiredResult``.

    The wire form is a dict, not a model: the SDK's server validates a handler's dict against the
    negotiated revision's result schema once, as it dumps it, so building the model here only to have it
    dumped and validated again cost a proxied call its content blocks' validation twice. A handler that
    needs the client's input first (2026-07-28 elicitation) returns ``mcp_input_required``; one whose call
    must end in a JSON-RPC error (``{code, message, data}``) returns ``mcp_protocol_error``.
    """
    protocol = result.pop("mcp_protocol_error", None)
    if isinstance(protocol, dict):  # the call ends in a JSON-RPC error, not a tool result
        from mcp.shared.exceptions import MCPError

        raise MCPError(
            code=int(protocol["code"]), message=str(protocol["message"]), data=protocol.get("data")
        )
    interim = result.pop("mcp_input_required", None)
    if isinstance(interim, dict):
        return types.InputRequiredResult.model_validate(interim)
    upstream = result.pop("mcp_content", None)
    content = (
        upstream
        if isinstance(upstream, list)
        else [{"type": "text", "text": json.dumps(result, ensure_ascii=False, default=str)}]
    )
    return {
        "content": content,
        "structuredContent": result,
        "isError": not result.get("success", False),
        "resultType": "complete",
    }


def as_wire(result: dict[str, Any] | types.InputRequiredResult) -> dict[str, Any]:
    """:func:`tool_result`'s answer as the JSON the wire carries (what a task stores as its result)."""
    if isinstance(result, dict):
        return result
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)
