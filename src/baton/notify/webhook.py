"""The generic webhook channel: baton's own JSON POST, connected only where the destination rule allows.

apprise's JSON plugin resolves and connects inside ``requests``, where the address actually connected to
cannot be checked, so the ``webhook`` channel posts through httpcore (httpx's transport layer) instead.
For a URL the agent chose, the connection goes through :class:`GuardedBackend`, which resolves the name
once and connects only to a permitted IP (see :mod:`baton.notify.destinations`); the operator's own
``HITL_WEBHOOK_URL`` is connected to as configured. Either way: no redirects are followed, no proxy is
taken from the environment, certificates are verified for the URL's host name, and the answer's body is
read only up to 64 KiB and dropped (only the status counts).
"""

from __future__ import annotations

import base64
import ipaddress
import ssl
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

import httpcore

from baton import __version__
from baton.notify.channels import WebhookPost
from baton.notify.destinations import DestinationPolicy, DestinationRefusedError

#: How much of an answer's body is read (and dropped) before the connection is closed.
MAX_DRAINED_BYTES = 64 * 1024


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses the policy permits."""

    def __init__(self, policy: DestinationPolicy) -> None:
        self.policy = policy
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host`` once, connect to a permitted address, and check the connected peer."""
        last: Exception | None = None
        for address in await self.policy.resolve(host, port, timeout):
            try:
                stream = await self._backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            if not self._peer_permitted(host, address, stream.get_extra_info("server_addr")):
                await stream.aclose()
                raise DestinationRefusedError()
            return stream
        assert last is not None  # resolve() returns at least one address or raises
        raise last

    def _peer_permitted(self, host: str, address: str, peer: Any) -> bool:
        if not isinstance(peer, tuple) or not peer:
            return False
        connected = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
        if connected != ipaddress.ip_address(address):
            return False
        return self.policy.allows_host(host) or self.policy.permits(connected)

    async def sleep(self, seconds: float) -> None:
        """Sleep (httpcore's retry backoff; baton asks for no retries)."""
        await self._backend.sleep(seconds)


def _ssl_context() -> ssl.SSLContext:
    import certifi

    context = ssl.create_default_context()  # the system's CAs, SSL_CERT_FILE / SSL_CERT_DIR
    context.load_verify_locations(certifi.where())  # and the bundle httpx and requests use
    return context


async def post(webhook: WebhookPost, seconds: float) -> int:
    """POST ``webhook.body`` once and return the HTTP status; raises DestinationRefusedError or httpcore errors."""
    split = urlsplit(webhook.url)
    host = split.hostname or ""
    port = split.port or (443 if split.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    default_port = split.port is None or split.port == (443 if split.scheme == "https" else 80)
    headers = [
        (b"Host", (shown if default_port else f"{shown}:{port}").encode("idna")),
        (b"Content-Type", b"application/json"),
        (b"Accept", b"*/*"),
        (b"User-Agent", f"baton/{__version__}".encode("ascii")),
    ]
    if webhook.signing_key is not None:
        import time

        from baton.notify.signing import signature_headers

        headers += signature_headers(webhook.signing_key, webhook.message_id, int(time.time()), webhook.body)
    if split.username is not None:
        credentials = f"{unquote(split.username)}:{unquote(split.password or '')}".encode()
        headers.append((b"Authorization", b"Basic " + base64.b64encode(credentials)))
    target = (split.path or "/") + (f"?{split.query}" if split.query else "")
    url = httpcore.URL(
        scheme=split.scheme.encode("ascii"),
        host=host.encode("idna"),
        port=port,
        target=target.encode("ascii"),
    )
    backend = GuardedBackend(webhook.guard) if webhook.guard is not None else httpcore.AnyIOBackend()
    limits = {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}
    async with (
        httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=backend, retries=0, max_connections=1
        ) as pool,
        pool.stream(
            "POST", url, headers=headers, content=webhook.body, extensions={"timeout": limits}
        ) as response,
    ):
        drained = 0  # read a little of the answer so the connection closes cleanly, never all of it
        async for chunk in response.aiter_stream():
            drained += len(chunk)
            if drained >= MAX_DRAINED_BYTES:
                break
        return response.status
