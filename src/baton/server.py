"""Builds baton's MCP server from the tool groups and serves it over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import hmac
import importlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from baton import __version__, heap, tool_cache
from baton.addresses import is_loopback
from baton.agents import (
    AGENT_SCOPE_KEY,
    LOCAL_AGENT,
    OPERATOR,
    AgentDirectory,
    Caller,
    bearer_token,
    client_name,
    current_agent,
)
from baton.errors import BatonError, ConfigError, ToolNameError
from baton.http_identity import ADMIN_SCOPE_KEY, decision_authority
from baton.mcp_results import tool_result

if TYPE_CHECKING:
    from baton.config import Settings
    from baton.runtime import Runtime
    from baton.toolkit import ToolRegistry, ToolSpec

log = logging.getLogger("baton.server")

#: Each module has ``register(registry)``; import cost matters, so they import heavy things lazily.
TOOL_GROUPS: tuple[str, ...] = (
    "baton.subagents.tools",
    "baton.notify.tools",
    "baton.timers.tools",
    "baton.hitl.tools",
    "baton.ping",
    "baton.gateway.tools",
)

INSTRUCTIONS = (
    "baton lets you delegate to subagent models, ask a human administrator for approval or input, "
    "send notifications, set timers and use governed external MCP tools. Every result is a JSON object "
    "with `success`; failures carry `error` and a stable `error_class`."
)


def build_registry(runtime: Runtime) -> ToolRegistry:
    """Register every tool group's tools against one runtime."""
    from baton.toolkit import ToolRegistry
    from baton.tracing import configure

    configure()  # OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing imported otherwise
    registry = ToolRegistry(runtime)
    for module_name in TOOL_GROUPS:
        importlib.import_module(module_name).register(registry)
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
        self.wanted.set()
        heap.resume()  # start-up ends here (baton.heap)
        try:
            self.registry = await anyio.to_thread.run_sync(self._open)
        except BatonError as exc:
            log.error("baton could not start: %s: %s", exc.error_class, exc.message)
            self.error = exc
        finally:
            self.ready.set()
        return self.registry

    def _open(self) -> ToolRegistry:
        from baton.runtime import Runtime

        registry = build_registry(Runtime.open(self.settings))
        settings = registry.runtime.settings
        if tool_cache.usable(settings.home, settings.baton_database_url):
            tool_cache.store(settings.home, builtin_definitions(registry))
        return registry

    def cached_tools(self) -> list[dict[str, Any]] | None:
        """The cached built-in tool definitions, while the registry is still loading and when they are
        the whole listing (see :mod:`baton.tool_cache`); None means: wait for the registry."""
        if self.ready.is_set() or self.settings is None:
            return None
        if not self._cache_read:
            self._cache_read = True
            home = self.settings.home
            if tool_cache.usable(home, self.settings.baton_database_url):
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
    from baton.results import tool_definition

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


def build_server(loader: RegistryLoader) -> Server[Any]:
    """The low-level MCP server whose list and call handlers go through the registry."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cached = loader.cached_tools()
        if cached is not None:
            answer = types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in cached])
            loader.listed_from_cache()
            return answer
        registry = await loader.get()
        tools = [listed_tool(spec) for spec in registry.tools.values()]
        for source in registry.dynamic:
            for listed in await source.list_tools():
                tools.append(types.Tool.model_validate(listed))
        return types.ListToolsResult(tools=tools)

    async def run_call(
        ctx: Any, params: types.CallToolRequestParams, task: Any = None
    ) -> dict[str, Any] | types.InputRequiredResult:
        """One tool call; as an MCP task (``task``) it has no request to report progress on or elicit by."""
        from baton.toolkit import CallContext, Progress

        session = ctx.session
        try:
            registry = await loader.get()
        except BatonError as exc:
            result = exc.to_result()
        else:
            context = CallContext(
                progress=Progress(
                    session.report_progress if task is None and _asks_progress(params) else None
                ),
                client_capabilities=getattr(session, "client_capabilities", None),
                session=session if task is None else None,
                decider=decision_authority(registry.runtime.settings, getattr(ctx, "request", None)),
                protocol_version=getattr(ctx, "protocol_version", None) if task is None else None,
                input_responses=params.input_responses,
                request_state=params.request_state,
                task=task,
                agent=current_agent(ctx, registry.runtime.settings),
                client=client_name(ctx),
            )
            try:
                result = await registry.call(params.name, params.arguments, context)
            except ToolNameError as exc:  # the spec's -32602, not a tool result
                from baton.protocol_errors import protocol_error

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
        on_list_tools=list_tools,
    )
    # registered as a request handler, whose public contract (``HandlerResult``) takes the result's wire
    # dict, which the SDK validates once as it serializes it (see :func:`baton.mcp_results.tool_result`)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    from baton.tracing import HeaderTraceContext

    server.middleware.insert(0, HeaderTraceContext())  # before the SDK's span: HTTP traceparent as parent
    from baton.protocol_errors import ToolNameGuard

    server.middleware.insert(0, ToolNameGuard())  # outermost: an over-long name reaches nothing else
    from baton.hitl.mrtr import boundary

    server.middleware.append(boundary(loader.current_settings))
    from baton.task_listen import ListenHandler
    from baton.tasks import install

    install(server, loader, run_call, ListenHandler)
    return server


@contextlib.asynccontextmanager
async def running_services(registry: ToolRegistry) -> AsyncIterator[None]:
    """Run the subsystems' background tasks for as long as the server runs; at the end, sign the chain head
    (the shutdown checkpoint, docs/receipts.md)."""
    from baton.checkpoints import Checkpointer
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
                    from baton.checkpoints import Checkpointer

                    await anyio.to_thread.run_sync(Checkpointer(loader.registry.runtime).checkpoint_quietly)
                signal.signal(received, signal.SIG_DFL)
                os.kill(os.getpid(), received)

    from baton.stdio_guard import ScreenedStdin
    from baton.stdio_out import StdoutMessages, claimed_stdout

    stdin = ScreenedStdin(settings.baton_max_message_bytes)  # answers the lines the SDK would drop
    async with anyio.create_task_group() as group:
        group.start_soon(load_then_run_services)
        group.start_soon(checkpoint_on_stop_signal)
        # each answer written on the loop (a pipe) or in one thread hop (baton.stdio_out); the SDK's
        # dispatcher reads stdin's messages and writes its own, with no transport task between
        with claimed_stdout(loader.written) as stdout, anyio.CancelScope() as serving:
            messages = StdoutMessages(stdout, on_gone=serving.cancel)  # the client left: stop serving
            stdin.attach(messages)
            async with stdin:  # its reader is released however the serving ends
                await server.run(stdin, messages, server.create_initialization_options())
        group.cancel_scope.cancel()


def run_serve(http: str | None, stateless: bool) -> int:
    """``baton serve``: configure logging, then serve stdio or HTTP; returns the exit code."""
    import sys

    from baton.config import load_settings
    from baton.logs import configure_logging
    from baton.redaction import Redactor

    try:
        settings = load_settings()
    except BatonError as exc:
        sys.stderr.write(f"{exc.error_class}: {exc.message}\n")
        return 1
    settings.baton_http_stateless = settings.baton_http_stateless or stateless
    configure_logging(Redactor(settings.sensitive_values()))
    try:
        if not settings.baton_database_url:
            settings.home  # noqa: B018 (a BATON_HOME that is a file is config_invalid now, not after initialize)
        if http:
            heap.resume()
            from baton.runtime import Runtime

            host, _port = parse_bind(http)
            oauth = bool(settings.baton_oauth_issuer)
            check_http_bind(host, settings.baton_http_token, settings.baton_admin_token, oauth=oauth)
            anyio.run(serve_http, Runtime.open(settings), http)
        else:
            if sys.stdin.isatty():
                sys.stderr.write(
                    "baton serve: waiting for an MCP client on stdin (stdout carries JSON-RPC only); "
                    "Ctrl-C stops it.\n"
                )
                sys.stderr.flush()
            anyio.run(serve_stdio, settings)
    except BatonError as exc:
        sys.stderr.write(f"{exc.error_class}: {exc.message}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # never a traceback to a person (BATON_DEBUG=1 shows it)
        if os.environ.get("BATON_DEBUG") == "1":
            raise
        sys.stderr.write(
            f"internal_error: baton serve failed unexpectedly ({type(exc).__name__}); "
            "BATON_DEBUG=1 shows the traceback.\n"
        )
        return 1
    finally:
        heap.resume()
    return 0


def parse_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) to a host and port."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            "config_invalid", f"--http takes HOST:PORT with a port from 0 to 65535, not {bind!r}."
        )
    return host.strip("[]") or "127.0.0.1", int(port)


ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


class BearerTokenMiddleware:
    """Guards ``/mcp`` and ``/metrics``: names the agent behind each request, or refuses it with 401.

    In order: ``BATON_ADMIN_TOKEN`` is the operator (marked in ``scope["state"]`` so that the tool boundary
    grants it decision authority); ``BATON_HTTP_TOKEN`` is the agent named ``BATON_HTTP_AGENT_NAME``; any
    other bearer must be a registered agent's token (looked up per request, so a revocation holds at once).
    A request with no credential at all is the agent ``local``, only while no token is set and no agent is
    registered (a loopback server: off loopback a token or OAuth is required). The agent's caller is put
    in ``scope["state"]`` under :data:`baton.agents.AGENT_SCOPE_KEY`.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        admin_token: str | None = None,
        protected_prefix: str | tuple[str, ...] = ("/mcp", "/metrics"),
        *,
        directory: AgentDirectory | None = None,
        static_agent: str = "http-agent",
    ) -> None:
        self.app = app
        self.token = token
        self.admin_token = admin_token
        self.protected_prefix = protected_prefix
        self.directory = directory
        self.static_agent = static_agent

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """Refuse with 401 before the request reaches the MCP transport."""
        if scope["type"] == "http" and scope["path"].startswith(self.protected_prefix):
            state = scope.setdefault("state", {})
            state.pop(ADMIN_SCOPE_KEY, None)
            state.pop(AGENT_SCOPE_KEY, None)
            caller = await self.caller(dict(scope.get("headers") or []).get(b"authorization", b""))
            if caller is None:
                await _unauthorized(send)
                return
            state[AGENT_SCOPE_KEY] = caller
            if caller.role == "operator":
                state[ADMIN_SCOPE_KEY] = True
        await self.app(scope, receive, send)

    async def caller(self, supplied: bytes) -> Caller | None:
        """The caller a request's Authorization header names, or None (refused)."""
        if self.admin_token and _bearer_matches(supplied, self.admin_token):
            return OPERATOR
        if self.token and _bearer_matches(supplied, self.token):
            return Caller(self.static_agent)
        token = bearer_token(supplied)
        directory = self.directory
        if token is not None and directory is not None:
            return await directory.lookup_now(token)
        if supplied or self.token:
            return None
        if directory is not None and await directory.any_active_now():
            return None
        return Caller(LOCAL_AGENT)


def _bearer_matches(header: bytes, token: str) -> bool:
    """Constant-time comparison of an Authorization header with ``Bearer <token>`` (as bytes)."""
    return hmac.compare_digest(header, f"Bearer {token}".encode())


async def _unauthorized(send: Any) -> None:
    body = json.dumps(
        {"success": False, "error": "A valid bearer token is required.", "error_class": "http_unauthorized"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="baton", error="invalid_token"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


#: Extra Starlette routes (the web inbox) contributed by subsystems: module path -> ``routes(runtime)``.
HTTP_ROUTE_PROVIDERS: tuple[str, ...] = (
    "baton.hitl.inbox",
    "baton.hitl.enroll",
    "baton.chat.web",
    "baton.console.web",
    "baton.metrics",
    "baton.oauth",
)


def build_http_app(runtime: Runtime, host: str) -> Any:
    """The Starlette app: streamable HTTP at ``/mcp`` plus the subsystems' routes, behind the token check."""
    registry = build_registry(runtime)
    server = build_server(RegistryLoader(registry=registry))
    routes: list[Any] = []
    for module_name in HTTP_ROUTE_PROVIDERS:
        routes.extend(importlib.import_module(module_name).routes(runtime))
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        stateless_http=runtime.settings.baton_http_stateless,
        custom_starlette_routes=routes,
        transport_security=_no_sdk_host_check(),
    )
    inner_lifespan = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(starlette_app: Any) -> AsyncIterator[None]:
        async with running_services(registry), inner_lifespan(starlette_app):
            yield

    app.router.lifespan_context = lifespan
    guarded = BearerTokenMiddleware(
        app,
        runtime.settings.baton_http_token,
        runtime.settings.baton_admin_token,
        directory=AgentDirectory(runtime.store),
        static_agent=runtime.settings.baton_http_agent_name,
    )
    if runtime.settings.baton_oauth_issuer:
        from baton.oauth import OAuthMiddleware

        return OAuthMiddleware(app, guarded, runtime.settings, AgentDirectory(runtime.store))
    return guarded


def _no_sdk_host_check() -> Any:
    """Host and Origin are checked for every route by baton.http_guards.HostGuard (BATON_PUBLIC_URL included)."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def check_http_bind(
    host: str, token: str | None, admin_token: str | None = None, *, oauth: bool = False
) -> None:
    """Refuse a non-loopback bind without a bearer token (or OAuth), and an admin token equal to the agent's."""
    if not is_loopback(host) and not token and not oauth:
        raise ConfigError(
            "http_bind_refused",
            f"Refusing to listen on {host}: set BATON_HTTP_TOKEN to serve beyond loopback.",
        )
    if not is_loopback(host):
        from baton.http_guards import weak_token

        for name, value in (("BATON_HTTP_TOKEN", token), ("BATON_ADMIN_TOKEN", admin_token)):
            problem = weak_token(name, value) if value else None
            if problem:
                raise ConfigError(
                    "http_bind_refused",
                    f"Refusing to listen on {host}: {problem} (e.g. `python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))'`).",
                    variable=name,
                )
    if admin_token and token and hmac.compare_digest(admin_token.encode(), token.encode()):
        raise ConfigError(
            "config_invalid",
            "BATON_ADMIN_TOKEN must differ from BATON_HTTP_TOKEN: the agent's token may not decide approvals.",
        )


async def serve_http(runtime: Runtime, bind: str) -> None:
    """Serve streamable HTTP at ``/mcp`` on ``bind`` until cancelled."""
    import sys

    import uvicorn

    host, port = parse_bind(bind)
    settings = runtime.settings
    check_http_bind(
        host, settings.baton_http_token, settings.baton_admin_token, oauth=bool(settings.baton_oauth_issuer)
    )
    runtime.services.setdefault("http_base_url", f"http://{f'[{host}]' if ':' in host else host}:{port}")
    runtime.receipts.group_commit = True  # concurrent calls' tool-call receipts commit together
    from baton.hitl.links import record_served

    record_served(runtime)  # so `baton hitl link` in another shell knows whether its links would pass
    from baton.hitl.sessions import LoginThrottle
    from baton.http_guards import guarded
    from baton.http_inflight import InFlight

    throttle = LoginThrottle.for_runtime(runtime)  # failed authentication on /inbox*, /mcp, /metrics
    counted = InFlight(build_http_app(runtime, host), runtime.receipts)  # a lone call's receipt: inline
    app = guarded(counted, runtime.settings, host, port, throttle)
    # log_config=None: uvicorn's loggers propagate to baton's redacting handler; proxy headers are
    # honoured only from BATON_TRUSTED_PROXIES (baton.http_guards.TrustedProxy), never by default.
    from baton.http_limits import uvicorn_config

    config = uvicorn_config(
        app, host, port, runtime.settings, lifespan="on"
    )  # header deadline, connection cap
    paths = ("/mcp", "/inbox", "/inbox/console")

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                heap.settle()  # the start-up heap out of every later collection (baton.heap)
                announce_listening(self, host, paths)
                if not runtime.settings.baton_admin_token:
                    from baton.hitl.people import People

                    if not People(runtime).anyone_can_log_in():
                        sys.stderr.write(
                            "the inbox and console are off for login: nobody has enrolled a passkey "
                            "(`baton people add NAME`) and no BATON_ADMIN_TOKEN is set; an agent's "
                            "BATON_HTTP_TOKEN never opens them (signed links still work)\n"
                        )

    from baton.listening import listening_socket

    sock = listening_socket(host, port)
    await AnnouncingServer(config).serve(sockets=[sock])


def announce_listening(server: Any, host: str, paths: tuple[str, ...]) -> None:
    """One stderr block naming the URLs once uvicorn listens (stdout stays JSON-RPC only)."""
    import sys

    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else server.config.port
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    names = {"/mcp": "MCP (streamable HTTP)", "/inbox": "inbox", "/inbox/console": "console"}
    lines = [f"baton: listening on {base}"]
    lines += [f"  {names.get(path, path):<22} {base}{path}" for path in paths]
    lines.append("Ctrl-C stops it.")
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
