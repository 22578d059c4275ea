"""A request's page follows its own request live, in real headless Chromium against ``baton serve --http``:
when someone else decides, the buttons give way to who decided and what; a partial quorum approval shows
as counted; after your own decision no "Something changed… Reload" bar appears (issue 44)."""

from __future__ import annotations

from typing import Any

import pytest

from baton.hitl.broker import Decision, HitlBroker, NewRequest
from tests.hitl.helpers import goto
from tests.hitl.test_live_updates import title_counts
from tests.hitl.test_request_page_browser import ADMIN_TOKEN, _browser, _log_in

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]


async def test_a_request_page_shows_who_decided_live_and_no_reload_bar_after_your_own_decision(
    baton_env: dict[str, str], http_server_factory: Any, broker: HitlBroker
) -> None:
    from playwright.async_api import async_playwright

    base = http_server_factory({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}).base_url
    theirs = await broker.create(NewRequest("approval", "Drop the staging database?", None, 600))
    mine = await broker.create(NewRequest("approval", "Rotate the deploy key?", None, 600))
    quorum = await broker.create(NewRequest("approval", "Wire SGD 9,000?", None, 600, required_approvals=2))
    async with async_playwright() as playwright:
        browser, page = await _browser(playwright)
        await _log_in(page, base)

        # 1. someone else rejects while the page is open: the buttons go, the page says who and what
        await goto(page, f"{base}/inbox/requests/{theirs['request_id']}")
        broker.respond(theirs["request_id"], Decision(approved=False, via="cli", decided_by="bob"))
        await page.wait_for_selector("#live-outcome")
        assert (await page.text_content("#live-outcome") or "").startswith(
            "Already decided by bob: rejected."
        )
        assert await page.locator("#decide-buttons button").count() == 0
        assert await page.locator("#live-bar").is_hidden()

        # 2. a partial quorum approval elsewhere shows as counted, the request still pending
        await goto(page, f"{base}/inbox/requests/{quorum['request_id']}")
        broker.respond(quorum["request_id"], Decision(approved=True, via="cli", decided_by="bob"))
        await page.wait_for_selector("#live-outcome")
        assert await page.text_content("#live-outcome") == (
            "Approved so far by bob (1 of 2 counted); still pending."
        )
        assert await page.text_content("#quorum .quorum") == "1 of 2"

        # 3. my own decision, then an unrelated change: the title follows it, and no "changed" bar shows
        await goto(page, f"{base}/inbox/requests/{mine['request_id']}")
        await page.click("button.approve")
        await page.wait_for_selector("#status.approved")
        await broker.create(NewRequest("input", "Which region?", None, 600))
        await title_counts(page, "(2) ")  # the quorum request and the new question wait
        assert await page.locator("#live-bar").is_hidden()
        await browser.close()
