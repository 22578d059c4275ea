"""``mcp_ping``: the cheap read-only tool the benchmarks call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.boundary.toolkit import CallContext
from baton.config import Settings
from baton.runtime import Runtime
from baton.wire.server import build_registry


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime.open(Settings(baton_home=tmp_path / "home"))
    yield runtime
    runtime.close()


@pytest.mark.anyio
async def test_ping_echoes_the_message_and_leaves_a_tool_call_receipt(runtime: Runtime) -> None:
    registry = build_registry(runtime)
    assert registry.tools["mcp_ping"].read_only
    result = await registry.call("mcp_ping", {"message": "hello"}, CallContext())
    assert result == {"success": True, "message": "hello", "server": "baton", "version": result["version"]}
    [receipt] = runtime.receipts.list(kind="tool_call")
    assert receipt.payload["tool"] == "mcp_ping"
    assert receipt.payload["success"] is True


@pytest.mark.anyio
async def test_ping_refuses_unknown_arguments(runtime: Runtime) -> None:
    result = await build_registry(runtime).call("mcp_ping", {"nonsense": 1}, CallContext())
    assert result["success"] is False
    assert result["error_class"] == "invalid_arguments"


@pytest.mark.anyio
async def test_ping_receipts_form_a_chain_that_verifies(runtime: Runtime) -> None:
    registry = build_registry(runtime)
    for index in range(5):
        await registry.call("mcp_ping", {"message": f"m{index}"}, CallContext())
    report = runtime.receipts.verify()
    assert report.ok
    assert report.count == 5
    assert [r.seq for r in runtime.receipts.list()] == [1, 2, 3, 4, 5]
