"""The upstream's pipes as the session's streams (baton.gateway.sandbox.transport), on real child processes:
an oversized line kills the upstream, an unparsable line is handed over as its error, and a dead stdin
fails the send instead of hanging the session."""

from __future__ import annotations

import subprocess
import sys

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from baton.gateway.sandbox.transport import MAX_LINE_BYTES, _Lines, _Messages

pytestmark = pytest.mark.anyio

#: A hang guard, never a margin: each step below finishes as soon as the child acts.
GUARD_SECONDS = 300


async def _child(code: str) -> anyio.abc.Process:
    return await anyio.open_process(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


async def test_an_oversized_line_kills_the_upstream_and_ends_the_stream() -> None:
    # one valid message, then a line that never ends and outgrows the cap
    code = (
        "import sys\n"
        'sys.stdout.buffer.write(b\'{"jsonrpc": "2.0", "method": "notifications/initialized"}\\n\')\n'
        f"chunk = b'x' * (1 << 20)\n"
        f"for _ in range({MAX_LINE_BYTES // (1 << 20) + 2}): sys.stdout.buffer.write(chunk)\n"
        "sys.stdout.flush()\n"
        "import time; time.sleep(3600)\n"
    )
    process = await _child(code)
    lines = _Lines(process)
    with anyio.fail_after(GUARD_SECONDS):
        first = await lines.receive()
        assert isinstance(first, SessionMessage)
        oversized = await lines.receive()
        assert isinstance(oversized, ValueError) and "oversized" in str(oversized)
        with pytest.raises(anyio.EndOfStream):
            await lines.receive()
        assert await process.wait() != 0  # killed, not left running
    await process.aclose()


async def test_an_unparsable_line_is_handed_over_and_the_next_one_still_arrives() -> None:
    code = (
        "import sys\n"
        "sys.stdout.write('not json at all\\n')\n"
        'sys.stdout.write(\'{"jsonrpc": "2.0", "method": "notifications/initialized"}\\n\')\n'
    )
    process = await _child(code)
    lines = _Lines(process)
    with anyio.fail_after(GUARD_SECONDS):
        assert isinstance(await lines.receive(), ValueError)
        assert isinstance(await lines.receive(), SessionMessage)
        with pytest.raises(anyio.EndOfStream):
            await lines.receive()
        await process.wait()
    await process.aclose()


async def test_a_dead_stdin_fails_the_send_and_every_later_one() -> None:
    process = await _child("import sys; sys.stdin.close()")
    messages = _Messages(process)
    ping = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))
    with anyio.fail_after(GUARD_SECONDS):
        await process.wait()
        with pytest.raises(anyio.BrokenResourceError):  # nobody reads the pipe: the write fails at once
            await messages.send(ping)
        with pytest.raises(anyio.BrokenResourceError):  # and stays failed without writing again
            await messages.send(ping)
        await messages.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await messages.send(ping)
    await process.aclose()
