"""Runs INSIDE the sandbox (standard library only): 127.0.0.1:PORT → baton's egress socket, then the server.

The sandbox keeps its own network namespace (only ``lo``); this bridge is the one way out, and it only
reaches the Unix socket of baton's egress proxy, which decides per request whether the origin is allowed.

Usage: ``python3 netbridge.py PORT SOCKET -- ARGV...``; exits with the server's status.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until EOF, then half-close the other side."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def serve(listener: socket.socket, path: str) -> None:
    """Relay each accepted connection to the egress socket."""
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main() -> None:
    """Listen, start the server with our stdin/stdout, exit with its status."""
    port, path, separator, *argv = sys.argv[1:]
    if separator != "--" or not argv:
        raise SystemExit("usage: netbridge.py PORT SOCKET -- ARGV...")
    listener = socket.create_server(("127.0.0.1", int(port)))
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    sys.exit(subprocess.call(argv))


if __name__ == "__main__":
    main()
