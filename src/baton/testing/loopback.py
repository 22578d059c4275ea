"""The threaded HTTP server under baton's loopback peers (model server, webhook receiver)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A thread per connection and a listen backlog deep enough for hundreds of concurrent clients
    (socketserver's default of 5 makes the kernel drop SYNs, so clients retry after a second)."""

    daemon_threads = True
    request_queue_size = 1024

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of this server."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def close(self) -> None:
        """Stop serving and release the socket."""
        self.shutdown()
        self.server_close()


def serve_in_thread(handler: type[BaseHTTPRequestHandler], name: str) -> LoopbackHTTPServer:
    """Listen on an ephemeral port of 127.0.0.1 and serve from a daemon thread."""
    server = LoopbackHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
