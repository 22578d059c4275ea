"""Peer: baton's loopback OpenAI-compatible server with a fixed latency, in its own process.

Usage: ``model_server.py DELAY_SECONDS``; prints the ``/v1`` base URL on one line, serves until stdin
closes. A process of its own keeps the model server's threads off the measuring process's GIL.
"""

from __future__ import annotations

import sys

from baton.testing import Behavior, FakeLLMServer


def main() -> None:
    """Serve until stdin closes."""
    server = FakeLLMServer(default=Behavior(delay_seconds=float(sys.argv[1])))
    with server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
