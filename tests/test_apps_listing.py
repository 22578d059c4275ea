"""MCP Apps over stdio (docs/apps.md): a client that declares ``io.modelcontextprotocol/ui`` sees the request
card on the two asking tools, from the tool cache as from the registry, within the ``tools/list`` budget; a
client that does not sees tools with no ``_meta`` at all, and reads the card only if it asks for it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from baton.wire.apps import CARD_TOOLS, CARD_URI, EXTENSION_ID, MIME_TYPE
from tests.conftest import server_parameters

pytestmark = pytest.mark.anyio

DECLARED = {EXTENSION_ID: {"mimeTypes": [MIME_TYPE]}}


@asynccontextmanager
async def session_with(
    env: dict[str, str], extensions: dict[str, Any] | None
) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(server_parameters(env)) as (read, write),
        ClientSession(read, write, extensions=extensions) as session,
    ):
        await session.initialize()
        yield session


def listing_bytes(tools: list[Any]) -> int:
    dumped = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    return len(json.dumps({"tools": dumped}, separators=(",", ":")).encode())


def test_the_extension_names_are_the_sdks() -> None:
    from mcp.server import apps

    assert (EXTENSION_ID, MIME_TYPE) == (apps.EXTENSION_ID, apps.APP_MIME_TYPE)


async def test_a_client_that_declares_mcp_apps_sees_the_card_on_the_asking_tools_within_the_budget(
    baton_env: dict[str, str],
) -> None:
    cache = Path(baton_env["BATON_HOME"]) / "cache" / "tools.json"
    for cached in (False, True):  # the registry's listing, then the tool cache's on the second start
        assert cache.exists() is cached
        async with session_with(baton_env, DECLARED) as session:
            tools = (await session.list_tools()).tools
            resources = (await session.list_resources()).resources
            card = (await session.read_resource(CARD_URI)).contents[0]
        assert {tool.name for tool in tools if tool.meta} == CARD_TOOLS
        assert {(tool.meta or {}).get("ui", {}).get("resourceUri") for tool in tools if tool.meta} == {
            CARD_URI
        }
        assert listing_bytes(tools) < 48_000, listing_bytes(tools)  # the same budget as every client's
        assert CARD_URI in {str(resource.uri) for resource in resources}
    assert card.mime_type == MIME_TYPE
    assert (card.meta or {})["ui"]["csp"] == {"connectDomains": [], "resourceDomains": []}
    text = getattr(card, "text", "")
    assert '"decide_base": null' in text  # no HTTP server: the card names the CLI instead of a page
    assert "<script src" not in text and "<link" not in text  # self-contained: nothing loaded


async def test_a_client_that_does_not_declare_it_sees_no_card_and_no_meta(baton_env: dict[str, str]) -> None:
    async with session_with(baton_env, None) as session:
        tools = (await session.list_tools()).tools
        resources = (await session.list_resources()).resources
        card = (await session.read_resource(CARD_URI)).contents[0]
    assert not any(tool.meta for tool in tools)
    assert CARD_URI not in {str(resource.uri) for resource in resources}
    assert card.mime_type == MIME_TYPE  # readable by URI all the same: it holds nothing of any request


async def test_in_the_2026_07_28_era_the_request_carries_the_declaration_and_baton_declares_it_too(
    baton_env: dict[str, str],
) -> None:
    from mcp import Client
    from mcp.client.extension import advertise

    declared = advertise(EXTENSION_ID, DECLARED[EXTENSION_ID])
    async with Client(server_parameters(baton_env), extensions=[declared]) as client:
        assert client.protocol_version == "2026-07-28"
        tools = (await client.list_tools()).tools
        server = client.server_capabilities.extensions or {}
    assert {tool.name for tool in tools if tool.meta} == CARD_TOOLS
    assert EXTENSION_ID in server
