"""Peer: FastMCP's proxy in front of a stdio upstream (the command after ``--``).

Usage: ``fastmcp_proxy.py -- COMMAND ARGS...``; the proxy runs on stdio.
"""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

if __name__ == "__main__":
    command, *args = sys.argv[sys.argv.index("--") + 1 :]
    proxy = create_proxy(StdioTransport(command=command, args=args, keep_alive=True))
    proxy.run(show_banner=False)
