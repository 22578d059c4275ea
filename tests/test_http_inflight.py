"""baton.http.inflight.InFlight: the MCP POSTs being served are counted on the receipt log, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from baton.evidence.receipts import ReceiptLog, Redactor
from baton.http.inflight import InFlight
from baton.store.engine import Store

pytestmark = pytest.mark.anyio


async def test_only_posts_to_mcp_count_while_served_and_a_failing_request_is_uncounted(
    tmp_path: Path,
) -> None:
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor())
    seen: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(log.in_flight)
        if scope.get("query_string") == b"fail":
            raise RuntimeError("the app failed")

    counted = InFlight(app, log)

    async def nothing() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def drop(message: dict[str, Any]) -> None:
        return None

    for method, path in (("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp"), ("POST", "/inbox/login")):
        await counted({"type": "http", "method": method, "path": path}, nothing, drop)
    with pytest.raises(RuntimeError):
        await counted(
            {"type": "http", "method": "POST", "path": "/mcp", "query_string": b"fail"}, nothing, drop
        )
    await counted({"type": "lifespan"}, nothing, drop)
    assert seen == [1, 0, 0, 0, 1, 0]
    assert log.in_flight == 0
    log.store.dispose()
