"""The floor: a hand-written JSON-RPC line server with one echo tool (standard library only).

It answers initialize, tools/list and tools/call the way an MCP stdio server must, and nothing more;
no MCP server written in Python can answer a call faster over the same pipes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one message, or None for a notification."""
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "floor", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    """Serve stdin/stdout until stdin closes."""
    read, write = sys.stdin.buffer.readline, sys.stdout.buffer
    while line := read():
        response = answer(json.loads(line))
        if response is not None:
            write.write(json.dumps(response).encode() + b"\n")
            write.flush()


if __name__ == "__main__":
    main()
