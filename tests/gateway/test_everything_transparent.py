"""The proxy is transparent (issue 45, item 5): the published ``@modelcontextprotocol/server-everything``
locked, replayed and promoted unprefixed, its tools called through ``baton serve --http`` with the official
client answer exactly what the same server answers directly, and every call is a ``gateway_call`` receipt.

Networked (the real npm registry: lock fetches the closure, the direct run goes through npx).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from baton.config import load_settings
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy.policy_files import load_policy, write_policy
from baton.gateway.replay.replay import replay
from baton.gateway.serving.promotion import promote
from baton.runtime import Runtime
from tests.conftest import baton_environ
from tests.servers import free_port, http_server

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.needs("bwrap", "node", "npm-registry")]

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"  # pinned: its tool set is what the calls below name
#: Each tool with arguments whose answer does not depend on when or where it runs (``get-env`` shows the
#: environment, ``get-resource-reference`` a creation time, ``gzip-file-as-resource`` fetches a URL; the
#: toggles and the research query keep per-session state or ask the client).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hi baton"}),
    ("get-sum", {"a": 2, "b": 3.5}),
    ("get-structured-content", {"location": "Chicago"}),
    ("get-resource-links", {"count": 3}),
    ("get-annotated-message", {"messageType": "error"}),
    ("get-annotated-message", {"messageType": "success", "includeImage": True}),
    ("get-annotated-message", {"messageType": "debug"}),
    ("get-tiny-image", {}),
    ("trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``everything`` locked from the real registry, verified, replayed, its calls' tools allowed and served
    unprefixed, replayed again and promoted."""
    home = tmp_path_factory.mktemp("everything") / "home"
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        locked = artifacts.lock(runtime, f"npm:{PACKAGE}@{VERSION}", adapter_id="everything")
        stages.verify(runtime, "everything")
        replay(runtime, "everything", apply=True, record=True)
        path = Path(locked["policy_path"])
        policy, _ = load_policy(path)
        allowed = sorted({name for name, _ in CALLS})
        tools = policy.tools.model_copy(
            update={"allowed": allowed, "denied": sorted(set(policy.tools.denied) - set(allowed))}
        )
        serving = policy.serving.model_copy(update={"unprefixed": True})
        write_policy(path, policy.model_copy(update={"tools": tools, "serving": serving}))
        replay(runtime, "everything", apply=True)
        promote(runtime, "everything")
    finally:
        runtime.close()
    return baton_environ(home)


@pytest.fixture(scope="module")
async def proxied(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """The official client over streamable HTTP to ``baton serve --http`` on loopback."""
    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path_factory.mktemp("serve")):
        async with httpx.AsyncClient(timeout=120) as http:
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport) as client:
                yield client


@pytest.fixture(scope="module")
async def direct(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    """The same version of the server run directly (npx, its own cache), without baton."""
    home = tmp_path_factory.mktemp("npx")
    server = StdioServerParameters(
        command="npx",
        args=["-y", f"{PACKAGE}@{VERSION}"],
        env={"PATH": os.environ["PATH"], "HOME": str(home), "npm_config_cache": str(home / "cache")},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def gateway_calls(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every ``gateway_call`` receipt in the store, oldest first."""
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind="gateway_call", limit=10000)]
    finally:
        runtime.close()


async def test_the_tools_are_listed_under_their_own_names(proxied: Client) -> None:
    listed = {tool.name for tool in (await proxied.list_tools()).tools}
    assert {name for name, _ in CALLS} <= listed
    assert not any(name.startswith("everything__") for name in listed)
    assert "get-env" not in listed  # denied stays unlisted


async def test_every_answer_is_the_upstreams_and_every_call_is_receipted(
    env: dict[str, str], proxied: Client, direct: ClientSession
) -> None:
    before = len(gateway_calls(env))
    for name, arguments in CALLS:
        through = await proxied.call_tool(name, arguments)
        upstream = await direct.call_tool(name, arguments)
        assert through.is_error == upstream.is_error is False, (name, through)
        assert [c.model_dump() for c in through.content] == [c.model_dump() for c in upstream.content], name
        envelope = through.structured_content or {}
        assert envelope.get("adapter_id") == "everything" and envelope.get("tool") == name
        assert envelope.get("structured_content") == upstream.structured_content, name
    receipts = gateway_calls(env)[before:]
    assert [(r["adapter_id"], r["tool"], r["success"]) for r in receipts] == [
        ("everything", name, True) for name, _ in CALLS
    ]


async def test_a_denied_tool_answers_tool_denied_under_its_own_name(
    env: dict[str, str], proxied: Client
) -> None:
    result = await proxied.call_tool("get-env", {})
    assert result.is_error and (result.structured_content or {}).get("error_class") == "tool_denied"
    assert gateway_calls(env)[-1]["tool"] == "get-env"
