"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): the request card an approval or input call shows
in a client that renders apps (docs/apps.md).

Only a client that declares the extension (with the ``text/html;profile=mcp-app`` MIME type) sees the two
asking tools' ``_meta.ui.resourceUri``, so the listing of every other client keeps its bytes. The card is a
``ui://`` resource baton serves itself (:mod:`baton.hitl.card`); it decides nothing: its one action asks the
host to open the request's page at baton's own origin, where a person logs in and decides.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

#: The extension's identifier and its resource MIME type (``mcp.server.apps`` has the same two; importing
#: that module on the ``tools/list`` path would cost start-up time for every client).
EXTENSION_ID = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
CARD_URI = "ui://baton/request-card"
#: The tools whose calls the card renders.
CARD_TOOLS = frozenset({"mcp_request_admin_approval", "mcp_request_admin_input"})
#: The card's resource metadata: no network at all (every read goes through the host), a border.
CARD_UI_META: dict[str, Any] = {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}


def client_declares(ctx: Any) -> bool:
    """Whether this request's client declared MCP Apps with the card's MIME type (its own ``_meta`` in the
    2026-07-28 era, else the session's capabilities)."""
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    meta = getattr(ctx, "meta", None)
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if isinstance(declared, dict):
        extensions = declared.get("extensions") or {}
    else:
        capabilities = getattr(getattr(ctx, "session", None), "client_capabilities", None)
        extensions = getattr(capabilities, "extensions", None) or {}
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, dict) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(mime_types, list) and MIME_TYPE in mime_types


def listing_for(ctx: Any, tools: list[types.Tool]) -> list[types.Tool]:
    """The listing as this client sees it: with the card when it declared the extension, else unchanged."""
    return with_card(tools) if client_declares(ctx) else tools


def with_card(tools: list[types.Tool]) -> list[types.Tool]:
    """The listing with the card named on the asking tools (a copy; the cached definitions stay bare)."""
    return [
        tool.model_copy(update={"meta": {**(tool.meta or {}), "ui": {"resourceUri": CARD_URI}}})
        if tool.name in CARD_TOOLS
        else tool
        for tool in tools
    ]


def card_resource() -> types.Resource:
    """The card as ``resources/list`` names it."""
    return types.Resource(
        uri=CARD_URI,
        name="request-card",
        title="Human request card",
        mime_type=MIME_TYPE,
        _meta={"ui": CARD_UI_META},
    )


def read_card(runtime: Any) -> types.ReadResourceResult:
    """The card's HTML, with the address of baton's own request pages when it has one."""
    from baton.hitl.card import card_html
    from baton.identity.public_url import link_base

    html = card_html(link_base(runtime))
    contents = types.TextResourceContents(
        uri=CARD_URI, mime_type=MIME_TYPE, text=html, _meta={"ui": CARD_UI_META}
    )
    return types.ReadResourceResult(contents=[contents])
