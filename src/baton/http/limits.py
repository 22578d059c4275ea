"""Connection limits of baton's HTTP servers (``baton serve --http``, ``baton console``): slowloris defence.

uvicorn has no deadline for a request's headers (its keep-alive timer runs only between requests, and any
byte of a next request cancels it), so half-sent requests could hold every file descriptor. Its h11
protocol is extended here with two limits:

* **A header deadline** (``BATON_HTTP_HEADER_TIMEOUT_SECONDS``, default 10): a connection whose request
  headers are not complete that long after it opened (or after its last response, on keep-alive) is
  answered ``408 http_request_timeout`` and closed.
* **A body deadline** (``BATON_HTTP_BODY_TIMEOUT_SECONDS``, default 30): a request whose body is not
  complete that long after its headers is answered ``408 http_request_timeout`` (unless its answer has
  started) and closed; the app's next ``receive`` gets ``http.disconnect``. The timer is armed only when
  the body did not arrive with the headers, so the usual small MCP request costs nothing.
* **A connection cap** (``BATON_HTTP_MAX_CONNECTIONS``, default 512): a connection over it is answered
  ``503 http_too_many_connections`` at once, its sending side shut, and it is closed when the client closes
  or after the header deadline, whichever comes first; it never counts toward the cap.
* **A per-address share** (``BATON_HTTP_MAX_CONNECTIONS_PER_ADDRESS``, default 64): one peer address may hold
  at most that many of them; its next connection is refused the same way, so half-open connections from
  one peer cannot starve every other peer. (Behind a proxy every connection comes from the proxy's address.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Defaults of ``BATON_HTTP_HEADER_TIMEOUT_SECONDS``, ``BATON_HTTP_BODY_TIMEOUT_SECONDS`` and
#: ``BATON_HTTP_MAX_CONNECTIONS``.
DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
DEFAULT_BODY_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 64


def raw_refusal(status: int, reason: str, error_class: str, message: str) -> bytes:
    """A whole HTTP/1.1 JSON refusal with ``Connection: close``, as bytes (h11 cannot answer a half request)."""
    body = json.dumps({"success": False, "error": message, "error_class": error_class}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    return head + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (set by :func:`protocol_class`)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    #: Open connections by peer address, shared by one server's connections (set by :func:`protocol_class`).
    by_address: dict[str, int] = {}  # noqa: RUF012 - replaced per server by protocol_class

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None
        self._over_cap = False
        self._peer: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse a connection over the cap or its address's share with 503; otherwise start the header
        deadline."""
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        if (
            len(self.connections) >= self.max_connections
            or self.by_address.get(address, 0) >= self.per_address
        ):
            self._over_cap = True
            self.transport = transport
            transport.write(
                raw_refusal(
                    503,
                    "Service Unavailable",
                    "http_too_many_connections",
                    "The server holds as many connections as it allows (BATON_HTTP_MAX_CONNECTIONS, "
                    "BATON_HTTP_MAX_CONNECTIONS_PER_ADDRESS); retry later.",
                )
            )
            if transport.can_write_eof():
                transport.write_eof()  # the client reads the 503, then closes; its request is never parsed
            self._deadline = self.loop.call_later(self.header_timeout, transport.close)
            return
        self._peer = address
        self.by_address[address] = self.by_address.get(address, 0) + 1
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the deadlines; an over-cap connection was never counted, so uvicorn has nothing to undo."""
        self._disarm()
        self._disarm_body()
        if self._over_cap:
            self.transport.close()
            return
        if self._peer is not None:
            left = self.by_address.get(self._peer, 0) - 1
            if left > 0:
                self.by_address[self._peer] = left
            else:
                self.by_address.pop(self._peer, None)
            self._peer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """An over-cap connection's request is discarded unread."""
        if self._over_cap:
            return
        super().data_received(data)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """The client closed its side: an over-cap connection is done."""
        if self._over_cap:
            self.transport.close()
            return None
        return super().eof_received()

    def handle_events(self) -> None:
        """Once a request's headers are in (a new cycle), its header deadline is over and, when its body
        is not complete yet, its body deadline starts; once the body is complete, that is over too."""
        before = self.cycle
        super().handle_events()
        cycle = self.cycle
        if cycle is not before:
            self._disarm()
            self._disarm_body()
            if cycle is not None and cycle.more_body:
                self._body_deadline = self.loop.call_later(self.body_timeout, self._body_too_slow)
        elif self._body_deadline is not None and (cycle is None or not cycle.more_body):
            self._disarm_body()

    def on_response_complete(self) -> None:
        """A keep-alive connection's next request gets the same header deadline."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _disarm_body(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_too_slow(self) -> None:
        self._body_deadline = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete or self.transport.is_closing():
            return
        if not cycle.response_started:
            self.transport.write(
                raw_refusal(
                    408,
                    "Request Timeout",
                    "http_request_timeout",
                    "The request body did not arrive in time (BATON_HTTP_BODY_TIMEOUT_SECONDS).",
                )
            )
        self.transport.close()  # uvicorn marks the cycle disconnected: the app's receive says so

    def _headers_too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request in flight is the body deadline's and the app's business
        if self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:
            self.transport.close()  # an idle keep-alive connection: nothing was asked, nothing to answer
            return
        self.transport.write(
            raw_refusal(
                408,
                "Request Timeout",
                "http_request_timeout",
                "The request headers did not arrive in time (BATON_HTTP_HEADER_TIMEOUT_SECONDS).",
            )
        )
        self.transport.close()


def protocol_class(
    header_timeout: float,
    max_connections: int,
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS,
    per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` with these limits (uvicorn instantiates the class it is given)."""
    limits = {
        "header_timeout": header_timeout,
        "max_connections": max_connections,
        "body_timeout": body_timeout,
        "per_address": per_address,
        "by_address": {},
    }
    return type("BatonH11Protocol", (GuardedH11Protocol,), limits)


def uvicorn_config(app: Any, host: str, port: int, settings: Any, *, lifespan: Literal["on", "off"]) -> Any:
    """The ``uvicorn.Config`` of baton's HTTP servers: the guarded protocol, no uvicorn logging config,
    proxy headers only through ``BATON_TRUSTED_PROXIES`` (baton.http.guards.TrustedProxy)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan=lifespan,
        log_config=None,
        proxy_headers=False,
        http=protocol_class(
            settings.baton_http_header_timeout_seconds,
            settings.baton_http_max_connections,
            settings.baton_http_body_timeout_seconds,
            settings.baton_http_max_connections_per_address,
        ),
    )
