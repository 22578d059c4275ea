"""Run-time egress for ``network = "allowlist"``: the sandbox keeps no network; baton's proxy decides.

Enforcement, precisely:

- the sandbox still has its own network namespace (``--unshare-all``: only ``lo``), so nothing inside
  can reach any host address directly;
- :mod:`baton.gateway.sandbox.netbridge` runs inside it, listening on 127.0.0.1:``BRIDGE_PORT`` *of the
  sandbox*, and relays each connection to a Unix socket bound into the sandbox;
- baton serves that socket as an HTTP proxy (:class:`EgressProxy`): absolute-form requests
  (``GET http://host:port/…``) pass only when ``scheme://host:port`` is an allowed origin, and are
  sent on with ``Connection: close`` (one request per connection, so a kept-alive connection cannot
  carry a second request to another origin); ``CONNECT host:port`` passes only when an allowed
  origin has that host and port. Everything else gets ``403``.
- the server is told where the proxy is (``HTTP(S)_PROXY``; for the browser adapter Playwright's
  ``--proxy-server`` plus ``--allowed-origins`` as a second, in-browser check).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, TaskGroup

from baton.gateway.sandbox import scratch
from baton.gateway.sandbox.sandbox_spec import SandboxSpec

log = logging.getLogger("baton.gateway.egress")
BRIDGE_PORT = 3128
SOCKET_DIR_IN_SANDBOX = "/run/baton-egress"
BRIDGE_IN_SANDBOX = "/opt/baton/netbridge.py"
MAX_HEAD_BYTES = 64 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host:port`` with the default port made explicit."""
    return f"{scheme}://{host.lower()}:{port or DEFAULT_PORTS.get(scheme, 0)}"


def normalize(origin: str) -> str:
    """An allowed origin in the form :func:`origin_of` produces."""
    parts = urlsplit(origin)
    return origin_of(parts.scheme, parts.hostname or "", parts.port)


class EgressProxy:
    """An HTTP proxy on a Unix socket that lets through only the allowed origins."""

    def __init__(self, origins: list[str], adapter_id: str) -> None:
        self.origins = list(origins)
        self.allowed = {normalize(origin) for origin in origins}
        self.adapter_id = adapter_id
        self.directory = scratch.make("egress")
        self.path = self.directory / "egress.sock"
        self.refused: list[str] = []
        self._scope = anyio.CancelScope()

    async def open(self, group: TaskGroup) -> None:
        """Listen on the socket (connectable by the sandbox user) and serve in ``group``."""
        listener = await anyio.create_unix_listener(self.path)
        self.directory.chmod(0o755)
        self.path.chmod(0o666)

        async def serve() -> None:
            with self._scope:
                try:
                    async with listener:
                        await listener.serve(self._handle)
                except Exception:  # the egress proxy failing must not take the server down
                    log.exception("adapter %s: the egress proxy stopped", self.adapter_id)

        group.start_soon(serve)

    async def close(self) -> None:
        """Stop serving and remove the socket."""
        self._scope.cancel()
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.directory.rmdir()

    def _allows_connect(self, target: str) -> bool:
        host, _, port = target.rpartition(":")
        host = host.strip("[]").lower()
        return any(urlsplit(o).hostname == host and str(urlsplit(o).port) == port for o in self.allowed)

    async def _handle(self, client: ByteStream) -> None:
        with contextlib.suppress(Exception):
            async with client:
                head, rest = await _read_head(client)
                method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                if method == "CONNECT":
                    await self._connect(client, target, rest)
                else:
                    await self._forward(client, method, target, version, head, rest)

    async def _connect(self, client: ByteStream, target: str, rest: bytes) -> None:
        if not self._allows_connect(target):
            await self._refuse(client, target)
            return
        host, _, port = target.rpartition(":")
        async with await anyio.connect_tcp(host.strip("[]"), int(port)) as upstream:
            await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                await upstream.send(rest)
            await _relay(client, upstream)

    async def _forward(
        self, client: ByteStream, method: str, target: str, version: str, head: bytes, rest: bytes
    ) -> None:
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            await self._refuse(client, target)
            return
        origin = origin_of("http", parts.hostname, parts.port)
        if origin not in self.allowed:
            await self._refuse(client, origin)
            return
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = [
            line
            for line in head.split(b"\r\n")[1:]
            if line and not line.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))
        ]
        request = b"\r\n".join(
            [f"{method} {path} {version}".encode("latin-1"), *headers, b"Connection: close", b"", b""]
        )
        async with await anyio.connect_tcp(parts.hostname, parts.port or 80) as upstream:
            await upstream.send(request + rest)
            await _relay(client, upstream)

    async def _refuse(self, client: ByteStream, what: str) -> None:
        self.refused.append(what)
        log.warning("adapter %s: egress to %s refused (not an allowed origin)", self.adapter_id, what)
        body = f"baton egress proxy: {what} is not an allowed origin of adapter {self.adapter_id}\n".encode()
        await client.send(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


async def _read_head(client: ByteStream) -> tuple[bytes, bytes]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            raise ValueError("request head too large")
        buffer += await client.receive()
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


async def _relay(a: ByteStream, b: ByteStream) -> None:
    async def pump(source: ByteStream, sink: ByteStream) -> None:
        with contextlib.suppress(Exception):
            while True:
                await sink.send(await source.receive())
        with contextlib.suppress(Exception):
            await sink.send_eof()

    async with anyio.create_task_group() as group:
        group.start_soon(pump, a, b)
        group.start_soon(pump, b, a)


def bridged_argv(spec: SandboxSpec, egress: EgressProxy, browser: bool) -> SandboxSpec:
    """``spec`` wrapped in the in-sandbox bridge, with the proxy made known to the server."""
    proxy = f"http://127.0.0.1:{BRIDGE_PORT}"
    argv = list(spec.argv)
    if browser:
        origins = ";".join(egress.origins)
        argv += ["--proxy-server", proxy, "--allowed-origins", origins]
    bridge = Path(__file__).with_name("netbridge.py")
    wrapped = [
        "python3", BRIDGE_IN_SANDBOX, str(BRIDGE_PORT), f"{SOCKET_DIR_IN_SANDBOX}/egress.sock", "--", *argv
    ]  # fmt: skip
    env = {**spec.env, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy}
    binds = (*spec.extra_ro_binds, (bridge, BRIDGE_IN_SANDBOX), (egress.directory, SOCKET_DIR_IN_SANDBOX))
    return SandboxSpec(**{**spec.__dict__, "argv": wrapped, "env": env, "extra_ro_binds": binds})
