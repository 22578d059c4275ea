"""``baton serve``: load the settings, configure logging, then serve stdio or streamable HTTP."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio

from baton.errors import BatonError
from baton.wire import heap
from baton.wire.server import serve_stdio

if TYPE_CHECKING:
    from baton.config import Settings


def run_serve(
    http: str | None, stateless: bool, conformance_fixtures: bool = False, experimental_events: bool = False
) -> int:
    """``baton serve``: configure logging, then serve stdio or HTTP; returns the exit code."""
    import sys

    from baton.config import load_settings
    from baton.evidence.redaction import Redactor
    from baton.telemetry.logs import configure_logging

    try:
        settings = load_settings()
    except BatonError as exc:
        sys.stderr.write(f"{exc.error_class}: {exc.message}\n")
        return 1
    settings.baton_http_stateless = settings.baton_http_stateless or stateless
    settings.baton_conformance_fixtures = settings.baton_conformance_fixtures or conformance_fixtures
    settings.baton_experimental_events = settings.baton_experimental_events or experimental_events
    configure_logging(Redactor(settings.sensitive_values()))
    try:
        _serve(settings, http)
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


def _serve(settings: Settings, http: str | None) -> None:
    """Serve streamable HTTP on ``http`` (its bind checked first), else stdio, until the client or a signal
    ends it; a :class:`BatonError` is the caller's to report."""
    import sys

    if not settings.baton_database_url:
        settings.home  # noqa: B018 (a BATON_HOME that is a file is config_invalid now, not after initialize)
    if http:
        heap.resume()
        from baton.http.listening import check_http_bind
        from baton.runtime import Runtime
        from baton.wire.http_serve import parse_bind, serve_http

        host, _port = parse_bind(http)
        from baton.wire.conformance import check_fixtures_bind

        check_fixtures_bind(settings, host)
        oauth = bool(settings.baton_oauth_issuer)
        check_http_bind(host, settings.baton_http_token, settings.baton_admin_token, oauth=oauth)
        anyio.run(serve_http, Runtime.open(settings), http)
        return
    if sys.stdin.isatty():
        sys.stderr.write(
            "baton serve: waiting for an MCP client on stdin (stdout carries JSON-RPC only); Ctrl-C stops it.\n"
        )
        sys.stderr.flush()
    anyio.run(serve_stdio, settings)
