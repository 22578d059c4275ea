"""The one public address of ``baton serve --http``: ``BATON_PUBLIC_URL`` when set, else the address the
server really listens on (its bound port), at ``localhost`` for a loopback bind.

Every link (notifications, enrollment, ``baton hitl link``, elicitation) is built on it. ``localhost``
rather than ``127.0.0.1``: browsers refuse an IP address as a WebAuthn relying party id, and ``localhost``
is a secure context over plain HTTP, so passkeys work there. The serving process records the address in
``BATON_HOME`` so that ``baton people add`` in another shell points its links at the running server.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from baton.config import Settings

if TYPE_CHECKING:
    from baton.runtime import Runtime

#: Where the serving process records its public address (in BATON_HOME).
SERVED_URL_FILE = "http_public_url.served"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def ip_literal(host: str | None) -> bool:
    """Whether ``host`` is an IP address (which can never be a WebAuthn relying party id)."""
    try:
        ipaddress.ip_address((host or "").strip("[]"))
    except ValueError:
        return False
    return True


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listening_base(host: str, port: int) -> str:
    """The base URL of a server bound to ``host`` on ``port`` (the real bound port), in a form passkeys
    accept where one exists: ``http://localhost:PORT`` for a loopback bind."""
    if loopback(host):
        return f"http://localhost:{port}"
    if ip_literal(host) and ipaddress.ip_address(host.strip("[]")).is_unspecified:
        import socket  # every interface: the machine's own name reaches one of them

        host = socket.getfqdn()
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def link_base(runtime: Runtime) -> str | None:
    """The base every link and page address is built on in this process (``BATON_PUBLIC_URL``, else the
    running HTTP server's), without a trailing slash; None when neither is known (stdio alone)."""
    base = runtime.settings.baton_public_url or runtime.services.get("http_base_url")
    return str(base).rstrip("/") if base else None


def request_page(runtime: Runtime, request_id: str) -> str | None:
    """A request's inbox page (a login is needed to decide there), when :func:`link_base` is known."""
    base = link_base(runtime)
    return f"{base}/inbox/requests/{request_id}" if base else None


def record_public_url(settings: Settings, url: str) -> None:
    """Note the serving process's public address in BATON_HOME (atomically; it is not a secret)."""
    path = Path(settings.home) / SERVED_URL_FILE
    staging = path.with_name(path.name + f".{os.getpid()}.tmp")
    staging.write_text(url + "\n", encoding="utf-8")
    os.replace(staging, path)


def public_url(settings: Settings) -> str | None:
    """BATON_PUBLIC_URL, else the address the last ``baton serve --http`` on this home listened on."""
    if settings.baton_public_url:
        return settings.baton_public_url.rstrip("/")
    try:
        return (Path(settings.home) / SERVED_URL_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def passkey_address(url: str, public: str | None) -> str | None:
    """Where a page at ``url`` should be opened for passkeys to work, when its host is an IP address:
    the same page at BATON_PUBLIC_URL's host, or at ``localhost`` for a loopback address; else None."""
    parts = urlsplit(url)
    if not ip_literal(parts.hostname):
        return None
    if public and not ip_literal(urlsplit(public).hostname):
        base = urlsplit(public)
        return urlunsplit((base.scheme, base.netloc, parts.path, parts.query, ""))
    if parts.hostname is not None and loopback(parts.hostname):
        netloc = f"localhost:{parts.port}" if parts.port else "localhost"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return None
