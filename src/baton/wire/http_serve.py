"""Serves baton's MCP server as streamable HTTP at ``/mcp``, beside the subsystems' routes, behind auth."""

from __future__ import annotations

import contextlib
import hmac
import importlib
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import TYPE_CHECKING, Any, cast

from baton.errors import ConfigError
from baton.http.asgi import ASGIApp
from baton.identity.agents import AGENT_SCOPE_KEY, LOCAL_AGENT, OPERATOR, AgentDirectory, Caller, bearer_token
from baton.identity.callers import ADMIN_SCOPE_KEY
from baton.wire import heap
from baton.wire.json_answers import PER_REQUEST, JsonAnswers
from baton.wire.server import RegistryLoader, build_registry, build_server, running_services

if TYPE_CHECKING:
    from baton.runtime import Runtime


def parse_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) to a host and port."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            "config_invalid", f"--http takes HOST:PORT with a port from 0 to 65535, not {bind!r}."
        )
    return host.strip("[]") or "127.0.0.1", int(port)


class BearerTokenMiddleware:
    """Guards ``/mcp`` and ``/metrics``: names the agent behind each request, or refuses it with 401.

    In order: ``BATON_ADMIN_TOKEN`` is the operator (marked in ``scope["state"]`` so that the tool boundary
    grants it decision authority); ``BATON_HTTP_TOKEN`` is the agent named ``BATON_HTTP_AGENT_NAME``; any
    other bearer must be a registered agent's token (looked up per request, so a revocation holds at once).
    A request with no credential at all is the agent ``local``, only while no token is set and no agent is
    registered (a loopback server: off loopback a token or OAuth is required). The agent's caller is put
    in ``scope["state"]`` under :data:`baton.identity.agents.AGENT_SCOPE_KEY`.
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
    "baton.ops.metrics_route",
    "baton.http.oauth",
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
        json_response=cast(bool, PER_REQUEST),  # true only for a request JsonAnswers chose
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
        JsonAnswers(app, registry.quiet),
        runtime.settings.baton_http_token,
        runtime.settings.baton_admin_token,
        directory=AgentDirectory(runtime.store),
        static_agent=runtime.settings.baton_http_agent_name,
    )
    if runtime.settings.baton_oauth_issuer:
        from baton.http.oauth import OAuthMiddleware

        return OAuthMiddleware(app, guarded, runtime.settings, AgentDirectory(runtime.store))
    return guarded


def _no_sdk_host_check() -> Any:
    """Host and Origin are checked for every route by baton.http.guards.HostGuard (BATON_PUBLIC_URL included)."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def serve_http(runtime: Runtime, bind: str) -> None:
    """Serve streamable HTTP at ``/mcp`` on ``bind`` until cancelled."""
    import uvicorn

    from baton.http.listening import check_http_bind

    host, port = parse_bind(bind)
    settings = runtime.settings
    check_http_bind(
        host, settings.baton_http_token, settings.baton_admin_token, oauth=bool(settings.baton_oauth_issuer)
    )
    from baton.http.listening import listening_socket
    from baton.identity.public_url import listening_base, record_public_url

    sock = listening_socket(host, port)
    port = int(sock.getsockname()[1])  # the real port (``--http 127.0.0.1:0`` picks a free one)
    runtime.services.setdefault("http_base_url", listening_base(host, port))
    if not settings.baton_public_url:
        record_public_url(settings, runtime.services["http_base_url"])
    runtime.receipts.group_commit = True  # concurrent calls' tool-call receipts commit together
    from baton.identity.links import record_served

    record_served(runtime)  # so `baton hitl link` in another shell knows whether its links would pass
    from baton.http.guards import guarded
    from baton.http.inflight import InFlight
    from baton.identity.sessions import LoginThrottle

    throttle = LoginThrottle.for_runtime(runtime)  # failed authentication on /inbox*, /mcp, /metrics
    counted = InFlight(build_http_app(runtime, host), runtime.receipts)  # a lone call's receipt: inline
    app = guarded(counted, runtime.settings, host, port, throttle)
    # log_config=None: uvicorn's loggers propagate to baton's redacting handler; proxy headers are
    # honoured only from BATON_TRUSTED_PROXIES (baton.http.guards.TrustedProxy), never by default.
    from baton.http.limits import uvicorn_config

    config = uvicorn_config(
        app, host, port, runtime.settings, lifespan="on"
    )  # header deadline, connection cap
    paths = ("/mcp", "/inbox", "/inbox/console")

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                heap.settle()  # the start-up heap out of every later collection (baton.wire.heap)
                announce_listening(self, host, paths)
                warn_if_nobody_can_log_in(runtime)

    await AnnouncingServer(config).serve(sockets=[sock])


def warn_if_nobody_can_log_in(runtime: Runtime) -> None:
    """Say on stderr that the inbox and console cannot be logged into, when no passkey and no admin token
    open them."""
    if runtime.settings.baton_admin_token:
        return
    import sys

    from baton.identity.people import People

    if not People(runtime).anyone_can_log_in():
        sys.stderr.write(
            "the inbox and console are off for login: nobody has enrolled a passkey "
            "(`baton people add NAME`) and no BATON_ADMIN_TOKEN is set; an agent's "
            "BATON_HTTP_TOKEN never opens them (signed links still work)\n"
        )


def announce_listening(server: Any, host: str, paths: tuple[str, ...]) -> None:
    """One stderr block naming the URLs once uvicorn listens (stdout stays JSON-RPC only)."""
    import sys

    from baton.identity.public_url import listening_base

    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else server.config.port
    base = listening_base(host, port)
    names = {"/mcp": "MCP (streamable HTTP)", "/inbox": "inbox", "/inbox/console": "console"}
    lines = [f"baton: listening on {base}"]
    lines += [f"  {names.get(path, path):<22} {base}{path}" for path in paths]
    lines.append("Ctrl-C stops it.")
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
