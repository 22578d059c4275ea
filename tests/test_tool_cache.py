"""The tool-definition cache: the first tools/list of a later start is answered from it, and equals the
registry's own listing; it is never used when the gateway may add tools or the code changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.wire import tool_cache
from baton.wire.server import build_registry, builtin_definitions
from tests.conftest import stdio_session

pytestmark = pytest.mark.anyio


async def test_a_second_start_lists_exactly_what_the_registry_lists(baton_env: dict[str, str]) -> None:
    home = Path(baton_env["BATON_HOME"])
    async with stdio_session(baton_env) as session:
        first = [
            tool.model_dump(by_alias=True, exclude_none=True) for tool in (await session.list_tools()).tools
        ]
    cached = json.loads(tool_cache.cache_path(home).read_bytes())
    assert cached["fingerprint"] == tool_cache.fingerprint()
    assert tool_cache.cache_path(home).stat().st_mode & 0o777 == 0o600
    async with stdio_session(baton_env) as session:
        second = [
            tool.model_dump(by_alias=True, exclude_none=True) for tool in (await session.list_tools()).tools
        ]
    runtime = Runtime.open(load_settings(baton_env))
    try:
        assert builtin_definitions(build_registry(runtime)) == cached["tools"]
    finally:
        runtime.close()
    assert second == first
    assert [tool["name"] for tool in first] == [tool["name"] for tool in cached["tools"]]


def test_the_cache_is_unused_when_an_adapter_was_ever_locked_or_the_store_is_elsewhere(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    assert tool_cache.usable(home, None)
    (home / "gateway" / "demo").mkdir(parents=True)
    assert not tool_cache.usable(home, None)
    assert not tool_cache.usable(tmp_path / "other", "postgresql+psycopg://baton@127.0.0.1/db")


def test_a_stale_fingerprint_is_not_served(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tool_cache.store(home, [{"name": "mcp_ping", "inputSchema": {"type": "object"}}])
    assert tool_cache.load(home) is not None
    document = json.loads(tool_cache.cache_path(home).read_bytes())
    document["fingerprint"] = "0" * 64
    tool_cache.cache_path(home).write_text(json.dumps(document))
    assert tool_cache.load(home) is None
