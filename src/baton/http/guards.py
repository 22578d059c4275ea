"""ASGI guards in front of every HTTP route of ``baton serve --http`` (``/mcp``, ``/inbox…``).

* :class:`BodyLimit` refuses a body larger than its route allows with 413: at once when
  ``Content-Length`` says so, otherwise as soon as the bytes read pass the limit; nothing past the
  limit is buffered, and the route never sees a truncated body.
* The header and body deadlines (408 ``http_request_timeout``) and the connection cap are at the
  protocol level, in :mod:`baton.http.limits`.
* :class:`HostGuard` protects a loopback bind from DNS rebinding: the ``Host`` must name the bind (or
  ``localhost``, ``127.0.0.1``, ``[::1]``, or ``BATON_PUBLIC_URL``) else 421; a browser ``Origin``
  must be one of those too, else 403.
* :class:`AuthThrottle` counts failed authentication on ``/inbox*``, ``/mcp``, ``/metrics`` and ``/chat`` per
  client address and route family, and answers 429 with ``Retry-After`` while that pair is locked out; a
  loopback peer (the operator at the machine) is never locked out.
* :class:`TrustedProxy` takes the scheme from ``X-Forwarded-Proto`` only when the direct peer is a
  configured trusted proxy (``BATON_TRUSTED_PROXIES``), so cookies get ``Secure`` behind TLS.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any, Protocol
from urllib.parse import urlsplit

from baton.http.addresses import is_loopback
from baton.http.asgi import ASGIApp, Scope

#: Default of ``BATON_MAX_MESSAGE_BYTES`` (``/mcp`` and any route without its own limit).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: The limit of every ``/inbox`` route (forms: a token, a CSRF token, notes, an answer).
INBOX_BODY_BYTES = 64 * 1024
#: The limit of the chat callbacks (``/chat``): a Slack payload repeats the whole message it came from.
CHAT_BODY_BYTES = 256 * 1024


async def send_refusal(
    send: Any,
    status: int,
    error_class: str,
    message: str,
    headers: Iterable[tuple[bytes, bytes]] = (),
    **details: Any,
) -> None:
    """A JSON refusal ``{success: false, error, error_class}`` with ``status``."""
    body = json.dumps({**details, "success": False, "error": message, "error_class": error_class}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value)
    return None


class BodyLimit:
    """Refuses request bodies over the route's limit with 413 ``http_body_too_large``."""

    def __init__(self, app: ASGIApp, default_limit: int, prefix_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.default_limit = default_limit
        self.prefix_limits = prefix_limits or {}

    def limit_for(self, path: str) -> int:
        """The longest matching prefix's limit, else the default."""
        matches = [prefix for prefix in self.prefix_limits if path.startswith(prefix)]
        return self.prefix_limits[max(matches, key=len)] if matches else self.default_limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Check Content-Length, then count the bytes as the route reads them."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > limit):
            await self._refuse(send, limit)
            return
        state = {"read": 0, "refused": False, "started": False}

        async def limited_receive() -> dict[str, Any]:
            if state["refused"]:
                return {"type": "http.disconnect"}
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limit:
                    state["refused"] = True
                    if not state["started"]:
                        state["started"] = True
                        await self._refuse(send, limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            if state["refused"]:
                return  # the 413 is already out; the route's own answer is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not state["refused"]:
                raise

    @staticmethod
    async def _refuse(send: Any, limit: int) -> None:
        await send_refusal(
            send,
            413,
            "http_body_too_large",
            f"The request body is larger than this route allows ({limit} bytes).",
            limit_bytes=limit,
        )


def _norm_host(host: str) -> str:
    """``host`` as it appears in a Host header (IPv6 in brackets), lower case."""
    host = host.strip().lower()
    return f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host


class HostGuard:
    """DNS-rebinding protection for a loopback bind: only our own names as Host and Origin."""

    def __init__(self, app: ASGIApp, bind_host: str, port: int, public_url: str | None = None) -> None:
        self.app = app
        self.port = port  # 0: the port is chosen at bind time, so any port of our own names is ours
        self.names = {_norm_host(bind_host), "127.0.0.1", "localhost", "[::1]"}
        self.public: set[str] = set()
        self.public_origins: set[str] = set()
        if public_url:
            public = urlsplit(public_url)
            if public.netloc:
                self.public.add(public.netloc.lower())
                self.public_origins.add(f"{public.scheme}://{public.netloc}".lower())

    def host_ok(self, host: str) -> bool:
        """Whether a ``Host`` value (``name[:port]``) names this server."""
        if host in self.public:
            return True
        name, sep, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not sep:
            name, port = host, "80"
        if not port.isdigit():
            return False
        return name in self.names and (self.port == 0 or int(port) == self.port)

    def origin_ok(self, origin: str) -> bool:
        """Whether a browser ``Origin`` is this server (``null`` is left to the inbox's CSRF token)."""
        if origin == "null" or origin in self.public_origins:
            return True
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme == "http" and self.host_ok(rest)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """421 for a foreign Host, 403 for a foreign Origin."""
        if scope["type"] == "http":
            host = (_header(scope, b"host") or b"").decode("latin-1").strip().lower()
            if not self.host_ok(host):
                await send_refusal(
                    send, 421, "http_host_refused", "This server answers only to its own host name."
                )
                return
            origin = _header(scope, b"origin")
            if origin is not None and not self.origin_ok(origin.decode("latin-1").strip().lower()):
                await send_refusal(
                    send, 403, "http_host_refused", "Requests from another origin are refused."
                )
                return
        await self.app(scope, receive, send)


#: Off loopback, a bearer token must be at least this long ...
MIN_TOKEN_CHARS = 32
#: ... reach zxcvbn's top score ...
MIN_TOKEN_SCORE = 4
#: ... and an estimated 10^20 guesses (about 66 bits as zxcvbn counts, which charges random
#: characters 10 guesses each: a 32-character random token estimates 10^32, ``changeme-changeme-…`` 10^7.6).
MIN_TOKEN_GUESSES_LOG10 = 20.0
#: zxcvbn refuses longer inputs (its cost grows with length); a prefix this long is all it needs.
ESTIMATE_PREFIX_CHARS = 72


#: baton's own words: a token built from them (``baton-admin-token-…``) is guessable by anyone who read the docs.
OWN_WORDS = (
    "baton",
    "admin",
    "token",
    "http",
    "bearer",
    "inbox",
    "hitl",
    "agent",
    "secret",
    "operator",
    "mcp",
)


def token_strength(token: str, words: tuple[str, ...] = OWN_WORDS) -> tuple[int, float]:
    """zxcvbn's ``(score, log10 guesses)`` for the token's first :data:`ESTIMATE_PREFIX_CHARS` characters,
    with ``words`` as known inputs; the weaker of the token as written and with its separators removed (zxcvbn
    prices each ``-`` between known words as brute force)."""
    import math
    import re

    from zxcvbn import zxcvbn  # imported only when a non-loopback bind checks its tokens

    results = []
    for candidate in (token, re.sub(r"[^A-Za-z0-9]", "", token)):
        estimate = zxcvbn(candidate[:ESTIMATE_PREFIX_CHARS] or token[:1], user_inputs=list(words))
        results.append((int(estimate["score"]), math.log10(max(float(estimate["guesses"]), 1.0))))
    return min(result[0] for result in results), min(result[1] for result in results)


def weak_token(name: str, token: str) -> str | None:
    """Why ``token`` is too weak to guard a non-loopback bind, or None (never echoing the token)."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"{name} has {len(token)} characters; off loopback it needs at least {MIN_TOKEN_CHARS}"
    words = (*OWN_WORDS, name.lower(), *name.lower().split("_"))
    score, guesses_log10 = token_strength(token, words)
    if score < MIN_TOKEN_SCORE or guesses_log10 < MIN_TOKEN_GUESSES_LOG10:
        return (
            f"{name} looks guessable (zxcvbn score {score}, about 10^{guesses_log10:.0f} guesses; "
            f"score {MIN_TOKEN_SCORE} and 10^{MIN_TOKEN_GUESSES_LOG10:.0f} needed)"
        )
    return None


def parse_proxies(value: str | None) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``BATON_TRUSTED_PROXIES``: comma-separated addresses or CIDR networks."""
    from baton.errors import ConfigError

    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for item in (value or "").split(","):
        if item.strip():
            try:
                networks.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ConfigError(
                    "config_invalid",
                    f"BATON_TRUSTED_PROXIES: {item.strip()!r} is not an address or network.",
                    variable="BATON_TRUSTED_PROXIES",
                ) from None
    return networks


class TrustedProxy:
    """Believes ``X-Forwarded-Proto`` (``http``/``https``) only from a configured proxy address."""

    def __init__(self, app: ASGIApp, proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        self.app = app
        self.proxies = proxies

    def trusted(self, scope: Scope) -> bool:
        """Whether the direct peer is one of the trusted proxies."""
        client = scope.get("client")
        if not client or not self.proxies:
            return False
        try:
            address = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Set the scope's scheme (and client address) from the proxy's headers; ignore them from anyone else."""
        if scope["type"] == "http" and self.trusted(scope):
            proto = (_header(scope, b"x-forwarded-proto") or b"").decode("latin-1")
            last = proto.split(",")[-1].strip().lower()
            if last in ("http", "https"):
                scope["scheme"] = last
            forwarded = (_header(scope, b"x-forwarded-for") or b"").decode("latin-1").split(",")[-1].strip()
            if forwarded:
                scope["client"] = (forwarded, 0)
        await self.app(scope, receive, send)


#: Key in the ASGI scope's ``state``: a route saw a credential that failed (a route that answers a wrong
#: credential with something else than 401, e.g. the inbox's redirect to its login form, sets it).
AUTH_FAILED_KEY = "baton_auth_failed"
#: The routes that authenticate: failures count per address and per route family (the prefix).
AUTH_PREFIXES = ("/inbox", "/mcp", "/metrics", "/chat")


class Throttle(Protocol):
    """What :class:`AuthThrottle` needs of :class:`baton.identity.sessions.LoginThrottle`."""

    def retry_after(self, address: str) -> int: ...
    def failed(self, address: str) -> None: ...
    def succeeded(self, address: str) -> None: ...


class AuthThrottle:
    """Failed authentication on ``/inbox*``, ``/mcp``, ``/metrics`` or ``/chat`` counts toward a lockout of
    that address on that route family only (guesses at ``/metrics`` never lock the inbox); a loopback
    peer is never throttled.

    A 401 to a request that presented a credential (a wrong bearer or OAuth token, a wrong login token), or a
    request a route marked with :data:`AUTH_FAILED_KEY`, is a failure; a request with no credential at all
    is no guess (an OAuth client's first, discovering request gets its 401 uncounted). While the address is locked out,
    every request to those routes gets 429 ``http_rate_limited`` with ``Retry-After``, and is not looked at:
    a correct token is refused too, exactly as the login form does. An accepted credential (an
    ``Authorization`` header or a login form answered below 400) clears the address.
    """

    def __init__(self, app: ASGIApp, throttle: Throttle) -> None:
        self.app = app
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """429 while locked out; otherwise count the response's verdict on the credential."""
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(AUTH_PREFIXES):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        if is_loopback(address):  # the operator at the machine is never locked out (a proxy is listed in
            await self.app(scope, receive, send)  # BATON_TRUSTED_PROXIES, so its clients have their own)
            return
        address = f"{address} {next(prefix for prefix in AUTH_PREFIXES if path.startswith(prefix))}"
        wait = self.throttle.retry_after(address)
        if wait:
            await send_refusal(
                send,
                429,
                "http_rate_limited",
                f"Too many failed authentications from this address; try again in {wait} seconds.",
                headers=[(b"retry-after", str(wait).encode())],
                retry_after_seconds=wait,
            )
            return
        presented = _header(scope, b"authorization") is not None or (
            path == "/inbox/login" and scope.get("method") == "POST"
        )
        status: dict[str, int] = {}

        async def watching_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            code = status.get("code")
            if (presented and code == 401) or (scope.get("state") or {}).get(AUTH_FAILED_KEY) is True:
                self.throttle.failed(address)
            elif presented and code is not None and code < 400:
                self.throttle.succeeded(address)


def guarded(app: ASGIApp, settings: Any, host: str, port: int, throttle: Throttle | None = None) -> ASGIApp:
    """``app`` behind the body limit, the loopback host check, the trusted-proxy scheme and, with
    ``throttle``, the failed-authentication throttle (outermost first); the body deadline is the
    protocol's (:mod:`baton.http.limits`)."""

    if throttle is not None:
        app = AuthThrottle(app, throttle)  # inside TrustedProxy: it counts the real client's address
    inner: ASGIApp = TrustedProxy(app, parse_proxies(settings.baton_trusted_proxies))
    if is_loopback(host):
        inner = HostGuard(inner, host, port, settings.baton_public_url)
    return BodyLimit(
        inner, settings.baton_max_message_bytes, {"/inbox": INBOX_BODY_BYTES, "/chat": CHAT_BODY_BYTES}
    )
