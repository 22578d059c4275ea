"""A new request reaches the person without a reload: the ``baton serve`` terminal line, and an open inbox
and console tab in real headless Chromium that update over server-sent events (title count, new row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import call
from tests.hitl.helpers import pending_requests
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS

ADMIN_TOKEN = "live-operator-token-0123456789abcdef"
AGENT_TOKEN = "live-agent-token-fedcba9876543210"

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]


async def title_counts(page: Any, prefix: str) -> None:
    """Wait until the tab's title starts with ``prefix`` (read over the protocol: the pages' CSP forbids the
    eval that Playwright's ``wait_for_function`` would need)."""
    with anyio.fail_after(120):
        while not (await page.title()).startswith(prefix):
            await anyio.sleep(0.1)


async def test_a_new_request_shows_on_the_terminal_and_in_open_tabs_live(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    server = http_server_factory(
        {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    )
    log = server._log.name
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        inbox = await context.new_page()
        await inbox.goto(f"{server.base_url}/inbox/login")
        await inbox.fill("#token", ADMIN_TOKEN)
        await inbox.click("#login button")
        await inbox.wait_for_url(f"{server.base_url}/inbox")
        assert await inbox.title() == "Pending requests · baton inbox"
        console = await context.new_page()
        await console.goto(f"{server.base_url}/inbox/console/requests")
        errors: list[str] = []
        for page in (inbox, console):
            page.on(
                "console", lambda message: errors.append(message.text) if message.type == "error" else None
            )
        # both tabs hold their event stream open before anything is asked
        for page in (inbox, console):
            await page.wait_for_selector("body[data-version]", state="attached")
        async with (
            http,
            streamable_http_client(f"{server.base_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
            anyio.create_task_group() as group,
        ):
            await session.initialize()
            group.start_soon(
                call,
                session,
                "mcp_request_admin_approval",
                {"request_message": "Ship release 4.2 to production?", "timeout_seconds": 3600},
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            # no reload by the test: the stream tells the tabs
            await inbox.wait_for_selector(f"tr[data-request-id='{request_id}']", timeout=60_000)
            await title_counts(inbox, "(1) ")
            assert await inbox.title() == "(1) Pending requests · baton inbox"
            await title_counts(console, "(1) ")
            await console.wait_for_selector("text=Ship release 4.2 to production?", timeout=60_000)
            await inbox.screenshot(path=str(tmp_path / "inbox-live.png"))
            with anyio.fail_after(300):
                while f"/inbox/requests/{request_id}" not in Path(log).read_text():
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        await browser.close()
    line = next(
        text for text in Path(log).read_text().splitlines() if f"/inbox/requests/{request_id}" in text
    )
    assert line.startswith("baton: approval requested by ") and "Ship release 4.2 to production?" in line
    assert errors == []  # the CSP let the same-origin script and its stream run


def test_the_event_stream_needs_a_login_and_the_script_is_same_origin_only(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    server = http_server_factory(
        {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    )
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        assert client.get("/inbox/events").status_code == 401
        agent = client.get("/inbox/events", headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
        assert agent.status_code == 401
        script = client.get("/inbox/static/live.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert (
            'new EventSource("/inbox/events"' in script.text
        )  # same origin, with ?request=ID on a request page
        page = client.get("/inbox/login")
        csp = page.headers["content-security-policy"]
        assert (
            "script-src 'self'" in csp
            and "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0]
        )
        assert "<script>" not in page.text  # no inline script anywhere
        with client.stream(
            "GET", "/inbox/events", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ) as events:
            assert events.status_code == 200
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert next(lines) == "event: state"
            assert next(lines).startswith('data: {"pending": 0, "pending_exact": true, "version": ')
