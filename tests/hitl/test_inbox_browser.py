"""The web inbox in real headless Chromium against ``baton serve --http``, with an MCP call waiting on it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.config import load_settings
from baton.identity.links import LinkSigner, load_secret
from tests.conftest import call
from tests.hitl.helpers import goto, pending_requests

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "browser-test-token-0123456789"
ADMIN_TOKEN = "browser-admin-token-9876543210"  # the operator's; the agent holds TOKEN

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.needs("chromium"),
]


async def _ask(session: ClientSession, message: str, into: dict[str, Any]) -> None:
    args = {"request_message": message, "context": {"artifact": "validation-only", "amount": {"SGD": 80}}}
    into.update(await call(session, "mcp_request_admin_approval", {**args, "timeout_seconds": 120}))


async def _settled(result: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(300):
        while not result:
            await anyio.sleep(0.05)
    return result


async def test_approve_in_chromium_and_links_forged_expired_reused_are_refused(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    signer = LinkSigner(
        load_secret(load_settings(env))
    )  # what the server signs with (derived from the token)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with (
        http,
        streamable_http_client(f"{server.base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
        async_playwright() as playwright,
    ):
        await session.initialize()
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = await browser.new_page()
        first: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(_ask, session, "Publish the validation bundle?", first)
            request_id = (await pending_requests(session))[0]["request_id"]
            await goto(page, f"{server.base_url}/inbox")
            assert page.url.endswith("/inbox/login")
            await page.fill("#token", ADMIN_TOKEN)
            await page.click("#login button")
            await page.click(f"tr[data-request-id='{request_id}'] a")
            assert "validation-only" in (await page.text_content("#context") or "")
            await page.fill("#admin_notes", "Approved in the browser.")
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            assert (await _settled(first))["approved"] is True
        assert first["success"] is True and first["admin_notes"] == "Approved in the browser."

        second: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(_ask, session, "Second, by link", second)
            request_id = (await pending_requests(session))[0]["request_id"]
            # the server (another process) keeps the system clock: the link lives an hour, not a margin
            query = signer.link_params(request_id, time.time() + 3600)
            link = f"{server.base_url}/inbox/link?{urlencode(query)}"
            forged = await goto(page, f"{server.base_url}/inbox/link?{urlencode({**query, 's': 'A' * 43})}")
            assert forged is not None and forged.status == 403
            expired_query = signer.link_params(request_id, time.time() - 5)
            expired = await goto(page, f"{server.base_url}/inbox/link?{urlencode(expired_query)}")
            assert expired is not None and expired.status == 403 and "expired" in await page.content()
            assert second == {}
            opened = await goto(page, link)
            assert opened is not None and opened.status == 200
            await page.click("button.approve")
            await page.wait_for_selector("#title")
            assert "approved" in (await page.text_content("#title") or "")
            assert (await _settled(second))["approved"] is True
        reused = await goto(page, link)
        assert reused is not None and reused.status == 403
        assert await page.text_content("#error-class") == "hitl_link_invalid"
        await browser.close()
