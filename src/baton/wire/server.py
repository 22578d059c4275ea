"""Builds baton's MCP server from the tool groups and serves it over stdio (HTTP: :mod:`baton.wire.http_serve`)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from baton import __version__
from baton.boundary.mcp_results import tool_result
from baton.errors import BatonError, ToolNameError
from baton.identity.agents import client_name, current_agent
from baton.identity.callers import decision_authority
from baton.wire import apps, heap, tool_cache
from baton.wire.json_answers import answered_as_json

if TYPE_CHECKING:
    from baton.boundary.toolkit import CallContext, ToolRegistry, ToolSpec
    from baton.config import Settings
    from baton.runtime import Runtime

log = logging.getLogger("baton.wire.server")

#: Each module has ``register(registry)``; import cost matters, so they import heavy things lazily.
TOOL_GROUPS: tuple[str, ...] = (
    "baton.subagents.tools",
    "baton.notify.tools",
    "baton.timers.tools",
    "baton.hitl.tools",
    "baton.wire.ping",
    "baton.gateway.serving.tools",
)

INSTRUCTIONS = (
    "baton lets you delegate to subagent models, ask a human administrator for approval or input, "
    "send notifications, set timers and use governed external MCP tools. Every result is a JSON object "
    "with `success`; failures carry `error` and a stable `error_class`."
)


def build_registry(runtime: Runtime) -> ToolRegistry:
    """Register every tool group's tools against one runtime."""
    from baton.boundary.toolkit import ToolRegistry
    from baton.telemetry.tracing import configure

    configure()  # OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing imported otherwise
    registry = ToolRegistry(runtime)
    for module_name in TOOL_GROUPS:
        importlib.import_module(module_name).register(registry)
    if runtime.settings.baton_conformance_fixtures:  # docs/conformance.md: the suite's reference fixtures
        importlib.import_module("baton.wire.conformance").register(registry)
    return registry


#: A stdio server loads its registry when a request needs it, after its first ``tools/list`` is answered
#: from the cache, or this long after it starts, whichever comes first.
LOAD_AT_THE_LATEST_SECONDS = 1.0


class RegistryLoader:
    """Opens the store and builds the registry in a worker thread, after the handshake is answered.

    ``initialize`` needs none of it, so a client gets its answer after importing only the MCP SDK; the
    first ``tools/list`` is answered from the tool cache when it can be, and loading starts after it
    (see :meth:`load_when_wanted`); any request that needs the registry starts it and waits until it is done.
    """

    def __init__(self, settings: Settings | None = None, registry: ToolRegistry | None = None) -> None:
        self.settings = settings
        self.registry = registry
        self.error: BatonError | None = None
        self._cached: list[dict[str, Any]] | None = None
        self._cache_read = False
        self._listed = False
        #: The registry is loaded, and the answer to the request that waited for it is not written yet.
        self._answer_pending = False
        self.ready = anyio.Event()
        #: Set when something needs the registry (or its first ``tools/list`` was answered from the cache).
        self.wanted = anyio.Event()
        if registry is not None:
            self.ready.set()

    async def load_when_wanted(self, at_most: float = LOAD_AT_THE_LATEST_SECONDS) -> ToolRegistry | None:
        """:meth:`load` once the registry is wanted, or ``at_most`` seconds after start (so background
        services run without any request): a client's handshake and first ``tools/list`` are answered
        without the load (SQLAlchemy, the store, every tool module) competing with them for the GIL."""
        with anyio.move_on_after(at_most):
            await self.wanted.wait()
        return await self.load()

    async def load(self) -> ToolRegistry | None:
        """Build the registry (once); a failure is kept and reported by every later request."""
        a_request_waits = self.wanted.is_set() and not self._listed
        self.wanted.set()
        try:
            self.registry = await anyio.to_thread.run_sync(self._open)
        except BatonError as exc:
            log.error("baton could not start: %s: %s", exc.error_class, exc.message)
            self.error = exc
        finally:
            heap.resume()  # start-up ends here, its imports the registry's too (baton.wire.heap)
            self.ready.set()
        if self.registry is not None:
            if a_request_waits:
                self._answer_pending = True  # written() tells the registry once that answer is out
            else:
                self.registry.start_up_answered.set()
        return self.registry

    def _open(self) -> ToolRegistry:
        from baton.identity.agents import AgentDirectory, refuse_registered_name
        from baton.runtime import Runtime

        runtime = Runtime.open(self.settings)
        try:
            refuse_registered_name(runtime.settings, AgentDirectory(runtime.store))
        except BatonError:
            runtime.close()
            raise
        registry = build_registry(runtime)
        settings = registry.runtime.settings
        # a cached listing this process read holds this code's definitions (its fingerprint matched):
        # building them again to compare is CPU on the first spawn's path (docs/benchmarks.md, "#51")
        if self._cached is None and tool_cache.usable(settings.home, settings.baton_database_url):
            tool_cache.store(settings.home, builtin_definitions(registry))
        return registry

    def cached_tools(self) -> list[dict[str, Any]] | None:
        """The cached built-in tool definitions, while the registry is still loading and when they are
        the whole listing (see :mod:`baton.wire.tool_cache`); None means: wait for the registry."""
        if self.ready.is_set() or self.settings is None:
            return None
        if not self._cache_read:
            self._cache_read = True
            home = self.settings.home
            fixtures = self.settings.baton_conformance_fixtures  # their tools are listed too: no cache
            if tool_cache.usable(home, self.settings.baton_database_url) and not fixtures:
                self._cached = tool_cache.load(home)
        if self._cached is None:
            self.wanted.set()
        return self._cached

    def listed_from_cache(self) -> None:
        """The first ``tools/list`` was answered from the cache: loading starts once that answer is written."""
        self._listed = True

    def written(self) -> None:
        """stdout wrote a message: after the cached ``tools/list`` answer, loading may start (before, the
        load's imports would take the GIL from that answer's serialization and write)."""
        if self._listed:
            self.wanted.set()
        if self._answer_pending and self.registry is not None:
            self._answer_pending = False
            self.registry.start_up_answered.set()

    def current_settings(self) -> Settings:
        """The settings this server runs with (known before the registry is loaded)."""
        if self.settings is not None:
            return self.settings
        if self.registry is None:
            raise BatonError("internal_error", "The server has no settings yet.")
        return self.registry.runtime.settings

    async def get(self) -> ToolRegistry:
        """The registry, once loaded; raises the loading error otherwise."""
        if not self.ready.is_set():  # once loaded, no wait: awaiting a set event still yields to the loop
            self.wanted.set()
            await self.ready.wait()
        if self.registry is None:
            raise self.error or BatonError("internal_error", "The server failed to load.")
        return self.registry


def listed_tool(spec: ToolSpec[Any]) -> types.Tool:
    """A built-in tool as ``tools/list`` shows it (title, annotations and output schema from baton.results)."""
    from baton.results.definitions import tool_definition

    listed: types.Tool = tool_definition(spec.name, spec.title, spec.description, spec.input_schema())
    return listed


def builtin_definitions(registry: ToolRegistry) -> list[dict[str, Any]]:
    """The built-in tools' definitions as JSON (what the tool cache keeps)."""
    return [
        listed_tool(spec).model_dump(mode="json", by_alias=True, exclude_none=True)
        for spec in registry.tools.values()
    ]


def _asks_progress(params: types.CallToolRequestParams) -> bool:
    """Whether the call carries a progress token (without one the SDK's report_progress sends nothing)."""
    meta = params.meta
    return meta is not None and meta.get("progress_token") is not None


def _tool_lister(
    loader: RegistryLoader,
) -> Callable[[Any, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]]:
    """The ``tools/list`` handler: the cached listing when the registry has one, else the built-in tools and
    every dynamic source's (the governed adapters')."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cached = loader.cached_tools()
        if cached is not None:
            tools = [types.Tool.model_validate(tool) for tool in cached]
            answer = types.ListToolsResult(tools=apps.listing_for(ctx, tools))
            loader.listed_from_cache()
            return answer
        registry = await loader.get()
        tools = [listed_tool(spec) for spec in registry.tools.values()]
        for source in registry.dynamic:
            for listed in await source.list_tools():
                tools.append(types.Tool.model_validate(listed))
        return types.ListToolsResult(tools=apps.listing_for(ctx, tools))

    return list_tools


def _call_context(
    ctx: Any, params: types.CallToolRequestParams, task: Any, settings: Settings
) -> CallContext:
    """What a tool call knows of its request: who calls (agent, client, decider), the session to elicit or
    report progress by, and the MRTR round; as an MCP task (``task``) it has no request to use."""
    from baton.boundary.toolkit import CallContext, Progress

    session = ctx.session
    streams = task is None and not answered_as_json()  # a JSON answer has no stream to write to
    return CallContext(
        progress=Progress(session.report_progress if streams and _asks_progress(params) else None),
        client_capabilities=getattr(session, "client_capabilities", None),
        session=session if streams else None,
        decider=decision_authority(settings, getattr(ctx, "request", None)),
        protocol_version=getattr(ctx, "protocol_version", None) if task is None else None,
        input_responses=params.input_responses,
        request_state=params.request_state,
        task=task,
        agent=current_agent(ctx, settings),
        client=client_name(ctx),
        apps_card=apps.client_declares(ctx) if params.name in apps.CARD_TOOLS else False,
    )


async def _set_log_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """``logging/setLevel``: the least severe ``notifications/message`` this session wants (a waiting call's
    where-to-decide line is ``notice``: :func:`baton.hitl.waiting.tell_client`)."""
    with contextlib.suppress(AttributeError):
        ctx.session.baton_log_level = params.level
    return types.EmptyResult()


def build_server(loader: RegistryLoader) -> Server[Any]:
    """The low-level MCP server whose list and call handlers go through the registry."""

    async def run_call(
        ctx: Any, params: types.CallToolRequestParams, task: Any = None
    ) -> dict[str, Any] | types.InputRequiredResult:
        """One tool call, its typed failures as results; an unknown tool name is the spec's -32602."""
        try:
            registry = await loader.get()
        except BatonError as exc:
            result = exc.to_result()
        else:
            context = _call_context(ctx, params, task, registry.runtime.settings)
            try:
                result = await registry.call(params.name, params.arguments, context)
            except ToolNameError as exc:
                from baton.boundary.protocol_errors import protocol_error

                raise protocol_error(exc) from None
        return tool_result(result)

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> dict[str, Any] | types.InputRequiredResult:
        return await run_call(ctx, params)

    server: Server[Any] = Server(
        "baton",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=_tool_lister(loader),
    )
    # registered as a request handler, whose public contract (``HandlerResult``) takes the result's wire
    # dict, which the SDK validates once as it serializes it (see :func:`baton.boundary.mcp_results.tool_result`)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_log_level)
    from baton.telemetry.tracing import HeaderTraceContext

    server.middleware.insert(0, HeaderTraceContext())  # before the SDK's span: HTTP traceparent as parent
    from baton.boundary.protocol_errors import ToolNameGuard

    server.middleware.insert(0, ToolNameGuard())  # outermost: an over-long name reaches nothing else
    from baton.hitl.mrtr import boundary

    server.middleware.append(boundary(loader.current_settings))
    from baton.tasks.extension import install
    from baton.tasks.listen import ListenHandler

    install(server, loader, run_call, ListenHandler)
    from baton.wire import resources

    resources.install(server, loader)
    server.extensions[apps.EXTENSION_ID] = {}  # MCP Apps: the request card (docs/apps.md)
    if loader.current_settings().baton_experimental_events:
        from baton.events.extension import install as install_events

        install_events(server, loader)
    if loader.current_settings().baton_conformance_fixtures:
        from baton.wire.conformance.catalog import install_methods

        install_methods(server)
    return server


@contextlib.asynccontextmanager
async def running_services(registry: ToolRegistry) -> AsyncIterator[None]:
    """Run the subsystems' background tasks for as long as the server runs; at the end, sign the chain head
    (the shutdown checkpoint, docs/receipts.md)."""
    from baton.evidence.checkpoints import Checkpointer
    from baton.hitl import terminal_line

    terminal_line.install(registry.runtime)  # one stderr line per new request (BATON_ANNOUNCE_ON_TERMINAL)
    checkpointer = Checkpointer(registry.runtime)
    try:
        async with anyio.create_task_group() as group:
            for task in registry.background:
                group.start_soon(task)
            group.start_soon(checkpointer.run)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(checkpointer.checkpoint_quietly)


async def serve_stdio(settings: Settings) -> None:
    """Serve one MCP connection on stdin/stdout (nothing else is ever written to stdout)."""

    loader = RegistryLoader(settings)
    server = build_server(loader)

    async def load_then_run_services() -> None:
        registry = await loader.load_when_wanted()
        if registry is not None:
            async with running_services(registry):
                await anyio.sleep_forever()

    async def checkpoint_on_stop_signal() -> None:
        # SIGTERM and SIGINT (Ctrl-C) end the process at once: a worker thread may be blocked reading
        # stdin, so a cancellation would wait for the next line or EOF. First the chain head is signed
        # (the shutdown checkpoint); then the signal's default action ends the process.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for received in signals:
                if loader.registry is not None:
                    from baton.evidence.checkpoints import Checkpointer

                    await anyio.to_thread.run_sync(Checkpointer(loader.registry.runtime).checkpoint_quietly)
                signal.signal(received, signal.SIG_DFL)
                os.kill(os.getpid(), received)

    from baton.wire import stdio_eras
    from baton.wire.stdio_guard import ScreenedStdin
    from baton.wire.stdio_out import StdoutMessages, claimed_stdout

    stdin = ScreenedStdin(settings.baton_max_message_bytes)  # answers the lines the SDK would drop
    async with anyio.create_task_group() as group:
        group.start_soon(load_then_run_services)
        group.start_soon(checkpoint_on_stop_signal)
        # each answer written on the loop (a pipe) or in one thread hop (baton.wire.stdio_out); the SDK's
        # dispatcher reads stdin's messages and writes its own, with no transport task between
        with claimed_stdout(loader.written) as stdout, anyio.CancelScope() as serving:
            messages = StdoutMessages(stdout, on_gone=serving.cancel)  # the client left: stop serving
            stdin.attach(messages)
            async with stdin:  # its reader is released however the serving ends
                await stdio_eras.serve(server, stdin, messages, server.create_initialization_options())
        group.cancel_scope.cancel()
