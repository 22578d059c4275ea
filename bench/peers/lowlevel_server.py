"""Peer: the official SDK's low-level ``Server`` with one echo tool, over stdio or streamable HTTP.

Usage: ``lowlevel_server.py`` (stdio) or ``lowlevel_server.py --http PORT``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

ECHO = types.Tool(
    name="echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    """The one tool."""
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Echo ``text``."""
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=False)


def build() -> Server[Any]:
    """The low-level server."""
    return Server("lowlevel-peer", version="0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    """Serve one connection on stdin/stdout."""
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(port: int) -> None:
    """Serve streamable HTTP at /mcp on 127.0.0.1:port."""
    import uvicorn

    app = build().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        anyio.run(serve_stdio)
