"""The listening socket of ``baton serve --http`` and ``baton console``, bound before uvicorn starts, so a
port in use or out of range is a typed error with one line, not a uvicorn log line and exit; and the rule
that refuses a bind beyond loopback without a credential."""

from __future__ import annotations

import errno
import hmac
import socket

from baton.errors import ConfigError
from baton.http.addresses import is_loopback

_REASONS = {
    errno.EADDRINUSE: "the port is already in use",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "that address is not on this machine",
}


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: any free one); ``http_bind_failed`` naming why not."""
    where = f"{f'[{host}]' if ':' in host else host}:{port}"
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError):
        raise ConfigError(
            "http_bind_failed", f"Cannot listen on {where}: the host does not resolve."
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        reason = _REASONS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        raise ConfigError("http_bind_failed", f"Cannot listen on {where}: {reason}.") from None
    return sock


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
        from baton.http.guards import weak_token

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
