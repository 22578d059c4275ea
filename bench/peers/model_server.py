"""Peer: an OpenAI-compatible chat-completions server with a fixed latency, asynchronous, in its own process.

Usage: ``model_server.py DELAY_SECONDS [WORKERS]``; prints the ``/v1`` base URL on one line, serves
until stdin closes. It answers exactly as ``baton.testing.FakeLLMServer`` does (the same ``answer``),
but on uvicorn's event loop instead of a thread per connection, so 500 concurrent requests each wait
their latency on one loop rather than 500 threads contending for the GIL: the model server must not be
the bottleneck of the fan-out benchmark. ``WORKERS`` > 1 runs that many uvicorn processes on one socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.testing import Behavior, FakeLLMServer


def build_app(delay_seconds: float) -> Starlette:
    """``POST /v1/chat/completions``: sleep the latency on the loop, then the fake model's answer."""
    answers = FakeLLMServer(default=Behavior(delay_seconds=delay_seconds))

    async def completions(request: Request) -> Response:
        body: dict[str, Any] = json.loads(await request.body() or b"{}")
        await asyncio.sleep(delay_seconds)
        payload = json.dumps(answers.answer(body, answers.default)).encode()
        return Response(payload, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def main() -> None:
    """Serve until stdin closes."""
    delay = float(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(delay), log_level="error", backlog=2048, timeout_keep_alive=60, lifespan="off"
    )
    children = [_fork_worker(config, sock) for _ in range(workers - 1)]
    server = uvicorn.Server(config)
    threading.Thread(target=_stop_on_eof, args=(server,), daemon=True).start()
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    server.run(sockets=[sock])
    for pid in children:
        os.kill(pid, 15)
        os.waitpid(pid, 0)


def _fork_worker(config: uvicorn.Config, sock: socket.socket) -> int:
    """One more uvicorn process accepting on the same listening socket."""
    pid = os.fork()
    if pid == 0:
        uvicorn.Server(config).run(sockets=[sock])
        os._exit(0)
    return pid


def _stop_on_eof(server: uvicorn.Server) -> None:
    sys.stdin.read()
    server.should_exit = True


if __name__ == "__main__":
    main()
