"""The request page in real headless Chromium at 1280×900 and 390×844, against ``baton serve --http`` with
an MCP client waiting: no sideways scroll, the decision after the whole request, who asked, a live countdown,
line breaks and markdown, and a confirmation that says truthfully whether a waiting call was told.

Screenshots go to tmp_path (and to docs/console/ when BATON_CONSOLE_SCREENSHOTS names that directory).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import Implementation

from baton.config import load_settings
from baton.identity.links import LinkSigner, load_secret
from baton.runtime import Runtime
from tests.conftest import call
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.layout import SIZES, check_sizes, in_first_viewport
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_live_updates import title_counts
from tests.hitl.test_waiter_gone import open_session, start_call_then_drop

AGENT_TOKEN = "page-agent-token-0123456789abcdef"
ADMIN_TOKEN = "page-admin-token-fedcba9876543210"
SQL = """UPDATE accounts SET frozen = true WHERE id = 1;
UPDATE accounts SET frozen = true WHERE id = 2;
UPDATE accounts SET frozen = true WHERE id = 3;
UPDATE accounts SET frozen = true WHERE id = 4;
UPDATE accounts SET frozen = true WHERE id = 5;
UPDATE accounts SET frozen = true WHERE id = 6;"""
HASH = "9f2c" * 16
NOTES = "## Why\n\n- the **fraud** score passed 0.93\n- see [the runbook](https://example.com/runbook)\n"

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]


@asynccontextmanager
async def _agent(base_url: str, client: str = "claude-code") -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with (
        http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, client_info=Implementation(name=client, version="2.1")) as session,
    ):
        await session.initialize()
        yield session


async def _ask(session: ClientSession, tool: str, into: dict[str, Any], **arguments: Any) -> None:
    into.update(await call(session, tool, {"timeout_seconds": 900, **arguments}))


async def _settled(result: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(300):
        while not result:
            await anyio.sleep(0.05)
    return result


async def _browser(playwright: Any) -> tuple[Any, Any]:
    browser = await playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    return browser, page


async def _log_in(page: Any, base_url: str) -> None:
    await goto(page, f"{base_url}/inbox/login")
    await page.fill("#token", ADMIN_TOKEN)
    await page.click("#login button")
    await page.wait_for_selector("#me")


def _publish(shots: Path) -> None:
    target = os.environ.get("BATON_CONSOLE_SCREENSHOTS")
    if target:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(target) / shot.name)


async def test_every_request_page_fits_a_phone_and_a_desktop_with_the_decision_after_the_request(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = server.base_url
    shots = tmp_path / "shots"
    shots.mkdir()
    context = {
        "statements": SQL,
        "why": NOTES,
        "bundle_sha256": HASH,
        "trace_id": "AbC0" * 40,  # one long unbroken value
        "accounts": [{"id": n, "owner": f"customer-{n}"} for n in range(1, 7)],
    }
    async with _agent(base) as session, async_playwright() as playwright:
        browser, page = await _browser(playwright)
        await goto(page, f"{base}/inbox/login")
        await check_sizes(page, shots, "login-token")
        await _log_in(page, base)
        approval: dict[str, Any] = {}
        question: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(
                    session,
                    "mcp_request_admin_approval",
                    approval,
                    request_message="Freeze six accounts the fraud model flagged?\nThey stay frozen until reviewed.",
                    context=context,
                    urgent=True,
                )
            )
            group.start_soon(
                lambda: _ask(
                    session,
                    "mcp_request_admin_input",
                    question,
                    question="Which region should the replay run in?",
                    options=["eu-west-1", "us-east-1", "ap-southeast-1"],
                    context={"reason": "The last replay in us-east-1 was throttled."},
                )
            )
            ids = {r["kind"]: r["request_id"] for r in await pending_requests(session, 2)}
            await goto(page, f"{base}/inbox")
            await title_counts(page, "(2) ")
            await check_sizes(page, shots, "inbox")
            # on a phone the list is cards that still say when each request came and when it expires
            await page.set_viewport_size({"width": 390, "height": 844})
            row = page.locator(f"tr[data-request-id='{ids['approval']}']")
            for cell in ("created", "expires", "agent"):
                await in_first_viewport(page, f"tr[data-request-id='{ids['approval']}'] td.{cell}")
            assert "UTC" in await row.locator("td.expires").inner_text()
            await page.set_viewport_size({"width": 1280, "height": 900})

            await goto(page, f"{base}/inbox/requests/{ids['approval']}")
            await check_sizes(page, shots, "request", request_page=True)
            assert await page.text_content("#agent") == "http-agent"
            assert await page.text_content("#client") == "claude-code"
            assert await page.inner_text("#message") == (
                "Freeze six accounts the fraud model flagged?\nThey stay frozen until reviewed."
            )
            statements = page.locator("#context tr", has=page.locator("th", has_text="statements"))
            assert await statements.locator(".rq-text").inner_text() == SQL  # six lines, not one
            why = page.locator("#context tr", has=page.locator("th", has_text="why"))
            assert await why.locator(".rq-md h2").inner_text() == "Why"
            assert await why.locator(".rq-md a").get_attribute("href") == "https://example.com/runbook"
            digest = await page.text_content("#digest")
            assert digest is not None and re.fullmatch(r"[0-9a-f]{64}", digest)
            assert "which a step-up binds" in await page.inner_text("#context .rq-digest")
            # the countdown is the page's own script at work (the absolute time stays as the fallback)
            await page.wait_for_selector("#countdown[data-ticking='1']", state="attached")
            assert re.fullmatch(r"1[45] min \d+ s", await page.text_content("#countdown") or "")
            assert (await page.text_content("#expires-at") or "").endswith(" UTC")

            await goto(page, f"{base}/inbox/requests/{ids['input']}")
            await check_sizes(page, shots, "question", request_page=True)
            # a question has no step-up: its digest names only what it was asked with
            question_digest = await page.inner_text("#context .rq-digest")
            assert "question was asked with" in question_digest and "step-up" not in question_digest

            await goto(page, f"{base}/inbox/console/requests")
            await check_sizes(page, shots, "console-requests", decide="#pending form.decide")
            await goto(page, f"{base}/inbox/console/requests/{ids['approval']}")
            await check_sizes(page, shots, "console-request", request_page=True)
            await page.fill("#admin_notes", "Frozen pending review.")
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            assert await page.text_content("#decided-by") == "operator"
            assert await page.text_content("#told") == "The waiting call was told at once."
            await check_sizes(page, shots, "console-request-decided")
            assert (await _settled(approval))["approved"] is True

            await goto(page, f"{base}/inbox/requests/{ids['input']}")
            await page.check("input[value='eu-west-1']")
            await page.click("button.approve")
            await page.wait_for_selector("#status.answered")
            assert await page.text_content("#told") == "The waiting call was told at once."
            assert (await _settled(question))["response"] == "eu-west-1"
        await browser.close()
    _publish(shots)
    names = ("login-token", "inbox", "request", "question", "console-requests", "console-request")
    expected = {f"{name}-{size}.png" for name in (*names, "console-request-decided") for size in SIZES}
    assert {p.name for p in shots.iterdir()} == expected


async def test_a_decision_says_truthfully_whether_a_waiting_call_was_told_and_who_decided(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = server.base_url
    signer = LinkSigner(load_secret(load_settings(env)))
    runtime = Runtime.open(load_settings(env))
    try:
        async with _agent(base) as session, async_playwright() as playwright:
            browser, page = await _browser(playwright)
            # 1. a call waits: deciding through a signed link says it was told, and by whom it was decided
            waited: dict[str, Any] = {}
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: _ask(session, "mcp_request_admin_approval", waited, request_message="Rotate?")
                )
                (listed,) = await pending_requests(session)
                query = signer.link_params(listed["request_id"], listed_expiry(listed))
                await goto(page, f"{base}/inbox/link?{urlencode(query)}")
                await check_sizes(page, None, "link", request_page=True)
                await page.click("button.reject")
                await page.wait_for_selector("#told")
                assert await page.text_content("#told") == "The waiting call was told at once."
                notice = await page.text_content("#notice")
                assert notice == f"Request {listed['request_id']} is rejected, decided by link-holder."
                assert (await _settled(waited))["approved"] is False

            # 2. nobody waits any more (the client ended its session): the page says so instead
            orphan = await _orphan(base, runtime, exclude={listed["request_id"]})
            await _log_in(page, base)
            await goto(page, f"{base}/inbox/requests/{orphan}")
            await page.fill("#admin_notes", "Approved after the agent left.")
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            told = await page.text_content("#told") or ""
            assert told.startswith("No call was waiting when this was decided")
            assert await page.text_content("#decided-by") == "operator"
            await check_sizes(page, None, "decided-no-waiter")

            # 3. the same for a link decision nobody waits on
            orphan = await _orphan(base, runtime, exclude={listed["request_id"], orphan})
            query = signer.link_params(orphan, listed_expiry({"expires_at": None}))
            await goto(page, f"{base}/inbox/link?{urlencode(query)}")
            await page.click("button.approve")
            await page.wait_for_selector("#told")
            assert (await page.text_content("#told") or "").startswith("No call was waiting")
            await browser.close()
    finally:
        runtime.close()


def listed_expiry(listed: dict[str, Any]) -> float:
    """A link's expiry: the request's own, or an hour from now for a request listed without one."""
    from datetime import datetime

    if listed.get("expires_at"):
        return datetime.fromisoformat(listed["expires_at"]).timestamp()
    import time

    return time.time() + 3600


def _waiters(runtime: Runtime, exclude: set[str]) -> dict[str, str | None]:
    from sqlalchemy import select

    from baton.store.schema import hitl_requests

    query = select(hitl_requests.c.id, hitl_requests.c.waiter_instance).where(
        hitl_requests.c.status == "pending"
    )
    with runtime.store.read() as connection:
        return {
            row.id: row.waiter_instance for row in connection.execute(query).all() if row.id not in exclude
        }


async def _orphan(base_url: str, runtime: Runtime, exclude: set[str]) -> str:
    """A pending request whose asking call is gone: asked over raw streamable HTTP, waited on (the waiter's
    mark is in the store), then the client deletes its session, which ends the call."""
    headers = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    async with httpx.AsyncClient(base_url=base_url, timeout=30, headers=headers) as http:
        mcp_session = await open_session(http)
        await start_call_then_drop(http, mcp_session)  # a dropped stream is no cancel: the call waits on
        with anyio.fail_after(300):
            while not (marked := [rid for rid, mark in _waiters(runtime, exclude).items() if mark]):
                await anyio.sleep(0.05)
        assert (await http.delete("/mcp", headers=mcp_session)).status_code == 200
    with anyio.fail_after(300):
        while _waiters(runtime, exclude)[marked[0]] is not None:
            await anyio.sleep(0.05)
    return marked[0]
