"""MCP prompts and resources: baton's own resources (the receipt chain's head, the caller's human requests)
and any other source's (:class:`ContentSource`, e.g. the conformance fixtures). baton ships no prompts of
its own, so ``prompts/list`` answers an empty, valid listing instead of ``-32601``.

Every read is scoped as the tools are: an agent reads its own requests only; another agent's request reads
exactly as an unknown URI (``-32602`` with the URI in ``data``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types

if TYPE_CHECKING:
    from baton.runtime import Runtime
    from baton.wire.server import RegistryLoader

CHAIN_HEAD_URI = "baton://receipts/head"
REQUEST_URI = "baton://requests/{request_id}"
_REQUEST_PREFIX = "baton://requests/"
_SOURCES_KEY = "mcp_content_sources"
#: How many pending requests ``resources/list`` names (the newest; the template reads any of them).
LISTED_REQUESTS = 100


class ContentSource:
    """Prompts, resources and completions beyond baton's own (each method: nothing by default)."""

    def prompts(self) -> list[types.Prompt]:
        """Prompts to list."""
        return []

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        """The prompt's result (or an ``InputRequiredResult``), or None when it is not this source's."""
        return None

    def resources(self) -> list[types.Resource]:
        """Resources to list."""
        return []

    def templates(self) -> list[types.ResourceTemplate]:
        """Resource templates to list."""
        return []

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """The resource's contents, or None when it is not this source's."""
        return None


def add_source(runtime: Runtime, source: ContentSource) -> None:
    """Serve ``source``'s prompts and resources beside baton's own."""
    runtime.services.setdefault(_SOURCES_KEY, []).append(source)


def sources(runtime: Runtime) -> list[ContentSource]:
    """The extra content sources of this runtime."""
    found: list[ContentSource] = runtime.services.get(_SOURCES_KEY, [])
    return found


def not_found(uri: str) -> Exception:
    """``-32602`` naming the URI (SEP-2164): the same answer for another agent's request."""
    from mcp.shared.exceptions import MCPError

    return MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})


def _json(uri: str, value: Any) -> types.ReadResourceResult:
    body = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=body)]
    )


def chain_head(runtime: Runtime) -> dict[str, Any]:
    """The receipt chain's tip: its seq and sha256 (seq 0 before the first receipt)."""
    newest = runtime.receipts.newest(limit=1)
    if not newest:
        return {"seq": 0, "sha256": None}
    return {"seq": newest[0].seq, "sha256": newest[0].sha256, "kind": newest[0].kind, "at": newest[0].at}


def read_own(runtime: Runtime, uri: str, caller: Any) -> types.ReadResourceResult | None:
    """baton's own resources: the chain head, or one of the caller's requests."""
    if uri == CHAIN_HEAD_URI:
        return _json(uri, chain_head(runtime))
    if not uri.startswith(_REQUEST_PREFIX):
        return None
    from baton.errors import BatonError
    from baton.hitl.broker import get_broker
    from baton.hitl.tools import status_view

    try:
        view = get_broker(runtime).get(uri.removeprefix(_REQUEST_PREFIX), agent=caller.read_scope)
    except BatonError:
        raise not_found(uri) from None
    return _json(uri, status_view(view))


def listed_own(runtime: Runtime, caller: Any) -> list[types.Resource]:
    """The chain head and the caller's pending requests."""
    from baton.hitl.broker import get_broker

    head = types.Resource(
        uri=CHAIN_HEAD_URI,
        name="receipt-chain-head",
        title="Receipt chain head",
        mime_type="application/json",
    )
    pending = get_broker(runtime).list_pending(agent=caller.read_scope)[:LISTED_REQUESTS]
    requests = [
        types.Resource(
            uri=_REQUEST_PREFIX + row["request_id"],
            name=row["request_id"],
            title=f"Human request {row['request_id']} ({row['status']})",
            mime_type="application/json",
        )
        for row in pending
    ]
    return [head, *requests]


def install(server: Any, loader: RegistryLoader) -> None:
    """The prompts and resources handlers, on the registry's runtime."""
    from baton.identity.agents import current_agent
    from baton.wire import apps

    async def runtime_and_caller(ctx: Any) -> tuple[Runtime, Any]:
        runtime = (await loader.get()).runtime
        return runtime, current_agent(ctx, runtime.settings)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        runtime = (await loader.get()).runtime
        return types.ListPromptsResult(prompts=[p for source in sources(runtime) for p in source.prompts()])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        runtime = (await loader.get()).runtime
        for source in sources(runtime):
            found = await source.get_prompt(ctx, params)
            if found is not None:
                return found
        from mcp.shared.exceptions import MCPError

        raise MCPError(code=types.INVALID_PARAMS, message=f"No prompt is named {params.name!r}.")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        runtime, caller = await runtime_and_caller(ctx)
        own = await _in_thread(lambda: listed_own(runtime, caller))
        if apps.client_declares(ctx):
            own.append(apps.card_resource())
        return types.ListResourcesResult(resources=own + [r for s in sources(runtime) for r in s.resources()])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        runtime = (await loader.get()).runtime
        own = types.ResourceTemplate(
            uri_template=REQUEST_URI,
            name="human-request",
            title="A human request",
            mime_type="application/json",
        )
        extra = [t for source in sources(runtime) for t in source.templates()]
        return types.ListResourceTemplatesResult(resource_templates=[own, *extra])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        runtime, caller = await runtime_and_caller(ctx)
        uri = str(params.uri)
        if uri == apps.CARD_URI:
            return apps.read_card(runtime)
        found: types.ReadResourceResult | None = await _in_thread(lambda: read_own(runtime, uri, caller))
        for source in sources(runtime):
            found = found or source.read(uri)
        if found is None:
            raise not_found(uri)
        return found

    server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)
    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, list_templates)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)


async def _in_thread(work: Callable[[], Any]) -> Any:
    """Store reads off the event loop."""
    import anyio

    return await anyio.to_thread.run_sync(work)
