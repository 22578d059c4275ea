"""Peer: FastMCP (the ``fastmcp`` package, the ``bench`` extra) with one echo tool, stdio or HTTP.

Usage: ``fastmcp_server.py`` (stdio) or ``fastmcp_server.py --http PORT``.
"""

from __future__ import annotations

import sys

from fastmcp import FastMCP

server = FastMCP("fastmcp-peer")


@server.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(
            server.http_app(path="/mcp"), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning"
        )
    else:
        server.run(show_banner=False)
