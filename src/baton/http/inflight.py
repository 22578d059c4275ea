"""How many MCP requests ``baton serve --http`` is serving right now, kept on the receipt log.

A ``tools/call`` answered while no other MCP request is in flight commits its receipt inline (a batch of
one); under concurrency the receipts are group-committed in a worker thread (``ReceiptLog.append_soon``).
A request counts from its first byte handed to the app until its answer (an SSE stream included) is sent,
so the count sees the clients waiting on the transport as well as those inside a tool. Only ``POST``s to
``/mcp`` count: a client's standing ``GET`` stream waits for server messages and appends nothing.
"""

from __future__ import annotations

from typing import Any

from baton.evidence.receipts import ReceiptLog
from baton.http.asgi import ASGIApp, Scope


class InFlight:
    """ASGI: counts the ``POST /mcp`` requests being served on :attr:`ReceiptLog.in_flight`."""

    def __init__(self, app: ASGIApp, receipts: ReceiptLog, path: str = "/mcp") -> None:
        self.app = app
        self.receipts = receipts
        self.path = path

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Count the request while the app serves it."""
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        receipts = self.receipts
        receipts.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            receipts.in_flight -= 1
