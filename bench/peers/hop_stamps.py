"""``baton serve`` with a clock stamp at each point of a proxied tool call (bench/hop_segments.py only).

Run: ``python bench/peers/hop_stamps.py STAMPS_FILE [--steps]``. Before baton's own ``main`` runs, this wraps (in
this process only; baton's code is unchanged) the functions a ``tools/call`` passes through, and stamps
``time.perf_counter_ns()`` (CLOCK_MONOTONIC: comparable with the client's stamps in another process):

- ``stdin_read``: ``baton.wire.stdio_in`` handed the request's line out (opens the call's record);
- ``sdk_dispatch``: the SDK's low-level server called baton's ``tools/call`` handler;
- ``proxy_entry``: ``GatewayProxy.call`` was entered;
- ``liveness_done``: the store's liveness read (``state.liveness_now``) returned;
- ``upstream_write``: the request's line was handed to the upstream's stdin writer;
- ``upstream_data``: the event loop got the upstream's answer bytes from its stdout pipe;
- ``upstream_read``: the upstream's answer line was read and parsed (on baton's direct ``tools/call``,
  ``baton.gateway.sandbox.direct_calls``: read and claimed for the waiting call, parsed after);
- ``upstream_returned``: the SDK client's ``call_tool`` returned the result (``Upstream.call``);
- ``receipt_committed``: the ``gateway_call`` receipt's append returned (committed);
- ``answer_write``: the SDK handed the serialized answer to stdout's writer (the record is closed once
  the pipe took it: stamped after, the client often reads it first).

Each closed record is one JSON line appended to STAMPS_FILE, after the answer is written. Calls must come
one at a time (the benchmark's client sends the next request after reading the answer).

With ``--steps`` the event loop's callbacks are counted too (every task step is one): each point then also
records the count so far as ``POINT#steps``. Counting slows the loop: read those runs' counts, not times.
"""

from __future__ import annotations

import asyncio.events
import asyncio.subprocess
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

#: The points stamped inside baton's process, in the order a call passes them.
POINTS = (
    "stdin_read",
    "sdk_dispatch",
    "proxy_entry",
    "liveness_done",
    "upstream_write",
    "upstream_data",
    "upstream_read",
    "upstream_returned",
    "receipt_committed",
    "answer_write",
)
#: How the SDK's serialized answer starts (a notification has no id; calls come one at a time).
ANSWER = '{"jsonrpc":"2.0","id":'


class Stamps:
    """The open call's record and the file closed records go to."""

    def __init__(self, path: str, steps: bool = False) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.record: dict[str, int] | None = None
        self.counting = steps
        self.steps = 0

    def open(self, now: int) -> None:
        """A ``tools/call`` line arrived: a new record."""
        self.record = {"stdin_read": now}
        if self.counting:
            self.record["stdin_read#steps"] = self.steps

    def stamp(self, point: str, now: int, after: str | None = None) -> None:
        """Stamp ``point`` once per call (only once ``after`` is stamped, when given)."""
        record = self.record
        if record is None or point in record or (after is not None and after not in record):
            return
        record[point] = now
        if self.counting:
            record[f"{point}#steps"] = self.steps

    def close(self) -> None:
        """The answer is written: the record goes to the file."""
        record, self.record = self.record, None
        if record is not None:
            os.write(self.fd, json.dumps(record).encode() + b"\n")


def wrap_async_before(owner: Any, name: str, on_call: Callable[[tuple[Any, ...]], None]) -> None:
    """Replace ``owner.name`` (a coroutine function) by one calling ``on_call(args)`` before it."""
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        on_call(args)
        return await original(*args, **kwargs)

    setattr(owner, name, wrapped)


def wrap_async_after(owner: Any, name: str, on_return: Callable[[Any, tuple[Any, ...]], None]) -> None:
    """Replace ``owner.name`` (a coroutine function) by one calling ``on_return(result, args)`` after it."""
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        on_return(result, args)
        return result

    setattr(owner, name, wrapped)


def install(stamps: Stamps) -> None:
    """Wrap the call path's functions (modules imported here, before ``baton serve`` starts)."""
    _stamp_stdio(stamps)
    _stamp_server(stamps)
    _stamp_gateway(stamps)


def _stamp_stdio(stamps: Stamps) -> None:
    """``stdin_read`` (opens a record on a ``tools/call`` line) and ``answer_write`` (closes it)."""
    from baton.wire import stdio_in, stdio_out

    def line_read(result: Any, args: tuple[Any, ...]) -> None:
        now = time.perf_counter_ns()
        if '"tools/call"' in result[0]:
            stamps.open(now)

    for reader in (stdio_in.LoopLines, stdio_in.ThreadLines):
        wrap_async_after(reader, "read", line_read)

    def answer(args: tuple[Any, ...]) -> None:
        now = time.perf_counter_ns()
        if args[1].startswith(ANSWER):
            stamps.stamp("answer_write", now)

    def written(result: Any, args: tuple[Any, ...]) -> None:
        if args[1].startswith(ANSWER):
            stamps.close()

    for out in (stdio_out.LoopStdout, stdio_out.FlushedStdout):
        wrap_async_before(out, "write", answer)
        wrap_async_after(out, "write", written)


def _stamp_server(stamps: Stamps) -> None:
    """``sdk_dispatch``: the SDK server built by ``baton.wire.server.build_server`` calls a wrapped ``tools/call``
    handler (baton registers it with ``Server.add_request_handler``)."""
    from baton.wire import server

    class StampedServer(server.Server):  # type: ignore[misc,name-defined]
        def add_request_handler(self, method: str, params_type: Any, handler: Any) -> None:
            async def stamped(ctx: Any, params: Any) -> Any:
                stamps.stamp("sdk_dispatch", time.perf_counter_ns())
                return await handler(ctx, params)

            super().add_request_handler(method, params_type, stamped if method == "tools/call" else handler)

    server.Server = StampedServer  # type: ignore[attr-defined]


def _stamp_gateway(stamps: Stamps) -> None:
    """From ``GatewayProxy.call``'s entry to the ``gateway_call`` receipt's commit."""
    from baton.evidence import receipts
    from baton.gateway.policy import state
    from baton.gateway.sandbox import transport
    from baton.gateway.serving import proxy, upstream

    call = proxy.GatewayProxy.call

    @functools.wraps(call)
    async def proxy_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        stamps.stamp("proxy_entry", time.perf_counter_ns())
        return await call(self, *args, **kwargs)

    proxy.GatewayProxy.call = proxy_call  # type: ignore[method-assign]
    liveness_now = state.liveness_now

    @functools.wraps(liveness_now)
    def liveness(*args: Any, **kwargs: Any) -> Any:
        row = liveness_now(*args, **kwargs)
        stamps.stamp("liveness_done", time.perf_counter_ns())
        return row

    state.liveness_now = liveness
    writer = "write_line" if hasattr(transport._Messages, "write_line") else "send"  # the old tree's A/B too
    wrap_async_before(
        transport._Messages, writer, lambda args: stamps.stamp("upstream_write", time.perf_counter_ns())
    )
    protocol = asyncio.subprocess.SubprocessStreamProtocol
    pipe_data_received = protocol.pipe_data_received

    @functools.wraps(pipe_data_received)
    def data_received(self: Any, fd: int, data: bytes) -> None:
        if fd == 1:  # the upstream's stdout (2 is its stderr)
            stamps.stamp("upstream_data", time.perf_counter_ns(), after="upstream_write")
        pipe_data_received(self, fd, data)

    protocol.pipe_data_received = data_received  # type: ignore[method-assign]
    wrap_async_after(
        transport._Lines,
        "receive",
        lambda result, args: stamps.stamp("upstream_read", time.perf_counter_ns(), after="upstream_write"),
    )
    _stamp_direct_read(stamps)
    wrap_async_after(
        upstream.Upstream,
        "call",
        lambda result, args: stamps.stamp("upstream_returned", time.perf_counter_ns()),
    )
    append = receipts.ReceiptLog.append

    @functools.wraps(append)
    def receipt(self: Any, kind: str, payload: dict[str, Any]) -> Any:
        made = append(self, kind, payload)
        if kind == "gateway_call":
            stamps.stamp("receipt_committed", time.perf_counter_ns())
        return made

    receipts.ReceiptLog.append = receipt  # type: ignore[method-assign]


def _stamp_direct_read(stamps: Stamps) -> None:
    """``upstream_read`` for an answer routed to baton's direct call (it never reaches the session)."""
    try:
        from baton.gateway.sandbox import direct_calls
    except ImportError:  # a tree without the direct path
        return
    claim = direct_calls.DirectCalls.claim

    @functools.wraps(claim)
    def claimed(self: Any, line: bytes) -> bool:
        taken = claim(self, line)
        if taken:
            stamps.stamp("upstream_read", time.perf_counter_ns(), after="upstream_write")
        return taken

    direct_calls.DirectCalls.claim = claimed  # type: ignore[method-assign]


def count_steps(stamps: Stamps) -> None:
    """Count every callback the event loop runs (``asyncio.Handle._run``: task steps, I/O callbacks)."""
    run = asyncio.events.Handle._run

    @functools.wraps(run)
    def counted(self: Any) -> None:
        stamps.steps += 1
        run(self)

    asyncio.events.Handle._run = counted  # type: ignore[method-assign]


def main() -> None:
    """Install the stamps, then run ``baton serve`` exactly as ``python -m baton serve`` does."""
    stamps = Stamps(sys.argv[1], steps="--steps" in sys.argv[2:])
    install(stamps)
    if stamps.counting:
        count_steps(stamps)
    sys.argv = ["baton", "serve"]
    from baton.launcher import main as baton_main

    baton_main()


if __name__ == "__main__":
    main()
