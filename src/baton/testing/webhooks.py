"""A real HTTP webhook receiver on 127.0.0.1, and a TCP peer that accepts connections and never answers.

:class:`WebhookReceiver` records every request (method, path, query, headers, JSON body) and
answers with a status chosen per path prefix, so one receiver can stand in for a Slack or
Discord incoming webhook, the Telegram Bot API, SendGrid's mail API and a generic JSON
webhook at once. It can fail the next N requests (to prove retries), fail every request
with a status, or hang without answering (to prove timeouts are bounded).
:class:`SilentServer` accepts TCP connections and sends nothing, which is how an SMTP
server or HTTP endpoint that never answers looks to a client.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


@dataclass
class ReceivedRequest:
    """One request as the receiver saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    json: Any = None


@dataclass
class WebhookReceiver:
    """A threaded loopback HTTP server; use as a context manager or call start()/stop()."""

    status: int = 200
    body: bytes = b'{"ok":true}'
    requests: list[ReceivedRequest] = field(default_factory=list)
    _fail_next: list[int] = field(default_factory=list)
    _hang: bool = False
    _released: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _httpd: LoopbackHTTPServer | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running receiver."""
        assert self._httpd is not None, "receiver not started"
        return self._httpd.base_url

    def url(self, path: str = "/") -> str:
        """The full URL of ``path`` on this receiver."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status``, then behave normally again."""
        with self._changed:
            self._fail_next.extend([status] * count)

    def hang(self) -> None:
        """Accept requests but never answer them (until stop())."""
        self._hang = True

    def start(self) -> WebhookReceiver:
        """Listen on an ephemeral port of 127.0.0.1 in a daemon thread."""
        self._httpd = serve_in_thread(_make_handler(self), "webhook-receiver")
        return self

    def stop(self) -> None:
        """Release hung requests and stop listening."""
        self._released.set()
        if self._httpd is not None:
            self._httpd.close()
            self._httpd = None

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, count: int, timeout: float = 300.0) -> list[ReceivedRequest]:
        """Block until at least ``count`` requests arrived (AssertionError after ``timeout``)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"expected {count} requests, received {len(self.requests)}")
            return list(self.requests)

    def all_text(self) -> str:
        """Every recorded request (path, headers, body) as one string, for searching."""
        with self._changed:
            return "\n".join(
                f"{r.method} {r.path} {json.dumps(r.headers)} {r.raw.decode('utf-8', 'replace')}"
                for r in self.requests
            )

    def _record(self, request: ReceivedRequest) -> int | None:
        """Store a request; the status to answer with, or None to hang."""
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
            if self._fail_next:
                return self._fail_next.pop(0)
        return None if self._hang else self.status


def _make_handler(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            split = urlsplit(self.path)
            request = ReceivedRequest(
                self.command,
                split.path,
                parse_qs(split.query),
                {k.lower(): v for k, v in self.headers.items()},
                raw,
                parsed,
            )
            status = receiver._record(request)
            if status is None:
                receiver._released.wait()
                self.close_connection = True  # a released client sees the connection end, not a wait
                return
            payload = receiver.body if status < 300 else b'{"ok":false,"error":"receiver failure"}'
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                return

        def do_POST(self) -> None:
            self._handle()

        def do_PUT(self) -> None:
            self._handle()

        def do_GET(self) -> None:
            self._handle()

    return Handler


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte (a peer that hangs)."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._connections: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The listening port."""
        return int(self._socket.getsockname()[1])

    @property
    def accepted(self) -> int:
        """How many connections were accepted so far."""
        return len(self._connections)

    def start(self) -> SilentServer:
        """Start accepting in a daemon thread."""
        self._socket.listen(16)
        self._socket.settimeout(0.1)
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._connections.append(connection)

    def stop(self) -> None:
        """Close every held connection and the listening socket."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        for connection in self._connections:
            connection.close()
        self._socket.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
