"""``baton console``: the operator console on loopback over the local store, with no MCP server.

It serves the inbox and the console (same routes, same authentication as ``baton serve --http``).
The login token is BATON_ADMIN_TOKEN when set (never an agent's BATON_HTTP_TOKEN); otherwise a random
token is made for this run only and shown once on the terminal that started it (like a notebook server's
token): it is not configuration, is never written anywhere, and dies with the process.
"""

from __future__ import annotations

import secrets
import sys
from typing import Any

import anyio

from baton.errors import BatonError, ConfigError
from baton.http.addresses import is_loopback

DEFAULT_BIND = "127.0.0.1:8766"


def run_console(bind: str = DEFAULT_BIND) -> int:
    """Serve the console until Ctrl-C; returns the exit code."""
    from baton.config import load_settings
    from baton.wire.http_serve import parse_bind

    try:
        host, port = parse_bind(bind)
        if not is_loopback(host):
            raise ConfigError(
                "http_bind_refused",
                f"baton console listens on loopback only, not {host}; a shared console is served by "
                "baton serve --http behind its tokens.",
            )
        settings = load_settings()
        one_run_token = None
        if not settings.baton_admin_token:
            one_run_token = secrets.token_urlsafe(24)
            settings.baton_admin_token = one_run_token
        anyio.run(_serve, settings, host, port, one_run_token)
    except BatonError as exc:
        sys.stderr.write(f"{exc.error_class}: {exc.message}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def build_app(runtime: Any) -> Any:
    """The inbox and console routes over ``runtime`` (no MCP endpoint)."""
    from starlette.applications import Starlette

    from baton.console import web
    from baton.hitl import enroll, inbox

    return Starlette(routes=[*inbox.routes(runtime), *enroll.routes(runtime), *web.routes(runtime)])


async def _serve(settings: Any, host: str, port: int, one_run_token: str | None) -> None:
    import uvicorn

    from baton.runtime import Runtime
    from baton.wire.http_serve import announce_listening

    runtime = Runtime.open(settings)
    from baton.http.guards import guarded
    from baton.identity.sessions import LoginThrottle

    # body limits, Host/Origin checks, proxies, the failed-authentication throttle
    app = guarded(build_app(runtime), settings, host, port, LoginThrottle.for_runtime(runtime))
    from baton.http.limits import uvicorn_config

    config = uvicorn_config(app, host, port, settings, lifespan="off")  # header deadline, connection cap

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                announce_listening(self, host, ("/inbox/console", "/inbox"))
                if one_run_token:
                    sys.stderr.write(
                        f"log in with this one-run token (not stored anywhere): {one_run_token}\n"
                    )
                else:
                    sys.stderr.write("log in with BATON_ADMIN_TOKEN\n")
                sys.stderr.flush()

    from baton.http.listening import listening_socket

    try:
        await AnnouncingServer(config).serve(sockets=[listening_socket(host, port)])
    finally:
        runtime.close()
