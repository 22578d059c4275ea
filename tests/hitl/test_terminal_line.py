"""``baton serve`` prints one stderr line per new request: who asked, what, where to decide it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from baton.config import load_settings
from baton.hitl import terminal_line
from baton.hitl.terminal_line import TerminalAnnouncer, request_line
from baton.runtime import Runtime
from tests.conftest import call, server_parameters
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio

VIEW = {
    "request_id": "hr_0123456789abcdef0123",
    "kind": "approval",
    "message": "Deploy to prod\nthen restart",
    "urgent": True,
    "expires_epoch": 1_800_000_000,
    "agent": "release-bot",
}


def test_the_line_names_the_agent_the_title_and_the_inbox_page() -> None:
    line = request_line(VIEW, "https://baton.example.com/")
    assert line == (
        "baton: URGENT approval requested by release-bot: Deploy to prod then restart | decide: "
        "https://baton.example.com/inbox/requests/hr_0123456789abcdef0123 | expires 08:00:00 UTC"
    )
    assert "decide: baton hitl show hr_0123456789abcdef0123" in request_line(VIEW, None)


def test_the_agents_text_cannot_drive_the_terminal() -> None:
    hostile = {**VIEW, "message": "ok\x1b[2J\x1b]0;pwned\x07\u202eevil\r", "agent": "a\x1b[31mb"}
    line = request_line(hostile, None)
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line and "\r" not in line
    assert "requested by a\\x1b[31mb: ok\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil\\r | decide" in line
    assert len(request_line({**VIEW, "message": "x" * 5000}, None)) < 250


def test_the_title_is_the_markdown_as_plain_text_as_every_list_shows_it() -> None:
    line = request_line({**VIEW, "message": "**Deploy** the [release](http://x) to `prod`"}, None)
    assert ": Deploy the release to prod | decide:" in line, line
    entity = request_line({**VIEW, "message": "a &#x202e; b\x1c c"}, None)  # decoded, then escaped
    assert ": a \\u202e b\\x1c c | decide:" in entity, entity


def test_it_can_be_turned_off(baton_env: dict[str, str]) -> None:
    for value, expected in (("0", False), ("1", True)):
        runtime = Runtime.open(load_settings({**baton_env, "BATON_ANNOUNCE_ON_TERMINAL": value}))
        try:
            terminal_line.install(runtime)
            assert (terminal_line.SERVICE in runtime.services) is expected
        finally:
            runtime.close()
    stream = io.StringIO()
    runtime = Runtime.open(load_settings(baton_env))
    try:
        TerminalAnnouncer(runtime, stream).announce(VIEW)
    finally:
        runtime.close()
    assert stream.getvalue().endswith("expires 08:00:00 UTC\n")


async def test_a_stdio_server_announces_each_new_request_on_stderr(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "stderr.log"
    asked: dict[str, Any] = {}
    with log.open("w") as errlog:
        async with (
            stdio_client(server_parameters(baton_env), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def ask() -> None:
                asked.update(
                    await call(
                        session,
                        "mcp_request_admin_approval",
                        {"request_message": "Rotate the signing key?", "timeout_seconds": 3600},
                    )
                )

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                request_id = (await pending_requests(session))[0]["request_id"]
                with anyio.fail_after(300):
                    while f"baton hitl show {request_id}" not in log.read_text():
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()
    line = next(text for text in log.read_text().splitlines() if request_id in text)
    assert line.startswith("baton: approval requested by ") and "Rotate the signing key?" in line
    assert asked == {}


async def test_a_stdio_server_announces_a_markdown_request_by_its_plain_title_loading_markdown_only_then(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """The title's markdown parser is imported on the first announcement, never while ``baton serve``
    starts (``PYTHONPROFILEIMPORTTIME`` makes the server list every import it does on stderr)."""
    log = tmp_path / "stderr.log"
    env = {**baton_env, "PYTHONPROFILEIMPORTTIME": "1"}
    with log.open("w") as errlog:
        async with (
            stdio_client(server_parameters(env), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await call(session, "mcp_list_pending_requests")
            assert "markdown_it" not in log.read_text()
            message = "**Deploy** the [release](http://x) to `prod`"
            async with anyio.create_task_group() as group:
                group.start_soon(call, session, "mcp_request_admin_approval", {"request_message": message})
                request_id = (await pending_requests(session))[0]["request_id"]
                with anyio.fail_after(300):
                    while f"baton hitl show {request_id}" not in log.read_text():
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()
    text = log.read_text()
    line = next(line for line in text.splitlines() if f"baton hitl show {request_id}" in line)
    assert ": Deploy the release to prod | decide:" in line, line
    assert "markdown_it" in text  # the check above can see the import
