"""A tool registry's result as MCP: a ``CallToolResult`` with baton's JSON as structured content, or the
interim ``InputRequiredResult`` of a multi-round-trip call.

Used by the server's ``tools/call`` handler and by the Tasks extension (:mod:`baton.tasks`), which imports
this module rather than the server.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import mcp_types as types


@functools.cache
def _content_blocks() -> Any:
    """The validator of a proxied upstream's content blocks, built once (building it cost more than using it)."""
    from pydantic import TypeAdapter

    return TypeAdapter(list[types.ContentBlock])


def tool_result(result: dict[str, Any]) -> types.CallToolResult | types.InputRequiredResult:
    """A registry result as MCP: JSON text, or a proxied upstream's own content blocks (``mcp_content``).

    A handler that needs the client's input first (2026-07-28 elicitation) returns ``mcp_input_required``.
    """
    interim = result.pop("mcp_input_required", None)
    if isinstance(interim, dict):
        return types.InputRequiredResult.model_validate(interim)
    upstream = result.pop("mcp_content", None)
    if isinstance(upstream, list):
        content: list[Any] = _content_blocks().validate_python(upstream)
    else:
        content = [types.TextContent(text=json.dumps(result, ensure_ascii=False, default=str))]
    return types.CallToolResult(
        content=content, structured_content=result, is_error=not result.get("success", False)
    )
