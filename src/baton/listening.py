"""The listening socket of ``baton serve --http`` and ``baton console``, bound before uvicorn starts, so a
port in use or out of range is a typed error with one line, not a uvicorn log line and exit."""

from __future__ import annotations

import errno
import socket

from baton.errors import ConfigError

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
