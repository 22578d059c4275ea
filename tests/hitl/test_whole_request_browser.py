"""What a person approves is what they saw (issue 44), in real headless Chromium at 390×844 and 1280×900
against ``baton serve --http``: a destructive last line planted in a long message, a long context string
and a long context list is on the page, clipped by no scroll box, and above the Approve button, on the
inbox's request page, the signed-link page and the console's request page; the console's list offers no
Approve for a request it cannot show whole.

Screenshots go to tmp_path (and to BATON_CONSOLE_SCREENSHOTS when that names a directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest

from baton.config import load_settings
from baton.hitl.broker import HitlBroker, NewRequest
from baton.identity.links import LinkSigner, load_secret
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.layout import SIZES
from tests.hitl.test_request_page_browser import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    _agent,
    _ask,
    _browser,
    _log_in,
    _publish,
    _settled,
    listed_expiry,
)

DESTRUCTIVE = "deletes 2 years of archived orders"
MESSAGE = (
    "Tidy the orders database tonight:\n\n"
    + "".join(f"- vacuum partition {n} of the orders table\n" for n in range(1, 25))
    + f"- {DESTRUCTIVE}\n"
)
CONTEXT = {
    "plan": "".join(f"step {n}: reindex shard {n}\n" for n in range(1, 40)) + f"step 40: {DESTRUCTIVE}",
    "effects": [f"shard {n} is read-only for a minute" for n in range(1, 30)] + [DESTRUCTIVE],
}

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]

#: Every rendering of ``needle`` under ``root``: its place in the document, whether it is shown at all, and
#: each ancestor whose overflow box it does not lie inside (a scroll box or a clip that hides it).
PLACES = """([root, needle]) => {
  const scope = document.querySelector(root);
  if (!scope) return [];
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  const found = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const at = node.data.indexOf(needle);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + needle.length);
    const r = range.getBoundingClientRect();
    const clips = [];
    for (let a = node.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === "visible" && s.overflowY === "visible") continue;
      const b = a.getBoundingClientRect();
      const top = b.top + a.clientTop, left = b.left + a.clientLeft;
      const inside = r.top >= top - 0.5 && r.bottom <= top + a.clientHeight + 0.5
        && r.left >= left - 0.5 && r.right <= left + a.clientWidth + 0.5;
      if (!inside) clips.push(`${a.tagName}.${a.className}#${a.id}`);
    }
    found.push({top: r.top + scrollY, bottom: r.bottom + scrollY, height: r.height,
                shown: node.parentElement.checkVisibility(), clips});
  }
  return found;
}"""
#: Where the first decide button starts, in document coordinates.
BUTTONS = """() => {
  const b = document.querySelector("#decide-buttons").getBoundingClientRect();
  return b.top + scrollY;
}"""
#: The places where the request says what it does, each with a root to search under.
ROOTS = ("#message .rq-md", "#context tr:nth-child(1)", "#context tr:nth-child(2)")


async def _seen_before_the_buttons(page: Any, where: str) -> None:
    """At each size, every root's destructive line is shown, clipped by nothing, and above the buttons."""
    for label, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        buttons = await page.evaluate(BUTTONS)
        for root in ROOTS:
            places = await page.evaluate(PLACES, [root, DESTRUCTIVE])
            assert places, f"{where} at {label}: {DESTRUCTIVE!r} is not under {root}"
            for place in places:
                assert place["shown"] and place["height"] > 0, (where, label, root, place)
                assert place["clips"] == [], (where, label, root, place)
                assert place["bottom"] <= buttons, (where, label, root, place, buttons)
    await page.set_viewport_size({"width": 1280, "height": 900})


async def _shoot(page: Any, shots: Path, name: str) -> None:
    """The first screen and the whole page, at each size."""
    for label, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        await page.screenshot(path=str(shots / f"{name}-{label}-screen.png"))
        await page.screenshot(path=str(shots / f"{name}-{label}.png"), full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 900})


async def test_a_destructive_last_line_is_seen_before_approve_on_every_page_that_decides(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    base = http_server_factory(env).base_url
    signer = LinkSigner(load_secret(load_settings(env)))
    shots = tmp_path / "shots"
    shots.mkdir()
    asked: dict[str, Any] = {}
    async with _agent(base) as session, async_playwright() as playwright:
        browser, page = await _browser(playwright)
        await _log_in(page, base)
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(
                    session, "mcp_request_admin_approval", asked, request_message=MESSAGE, context=CONTEXT
                )
            )
            (listed,) = await pending_requests(session)
            request_id = listed["request_id"]
            await goto(page, f"{base}/inbox/requests/{request_id}")
            await _seen_before_the_buttons(page, "inbox request page")
            await _shoot(page, shots, "long-request")
            link = urlencode(signer.link_params(request_id, listed_expiry(listed)))
            await goto(page, f"{base}/inbox/link?{link}")
            await _seen_before_the_buttons(page, "signed-link page")
            await goto(page, f"{base}/inbox/console/requests/{request_id}")
            await _seen_before_the_buttons(page, "console request page")
            # the console's list shows 300 characters and no context: its row sends you to read it all
            await goto(page, f"{base}/inbox/console/requests")
            row = page.locator(f"#pending tr[data-request-id='{request_id}']")
            assert await row.locator("button.approve").count() == 0
            await row.locator("a.review-link").click()
            await page.wait_for_selector("#decide-buttons")
            await page.click("button.reject")
            await page.wait_for_selector("#status.rejected")
            assert (await _settled(asked))["approved"] is False
        await browser.close()
    _publish(shots)


async def test_markdown_that_hides_a_line_when_rendered_shows_its_source_unfolded(
    baton_env: dict[str, str], http_server_factory: Any, broker: HitlBroker
) -> None:
    """An image's alt text and a link reference definition vanish from rendered markdown; the page then
    shows the source, open, so the line is still seen before Approve."""
    from playwright.async_api import async_playwright

    base = http_server_factory({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}).base_url
    hidden = f"Tidy the orders database.\n\n![{DESTRUCTIVE}](x)\n\n[note]: https://e.com 'and more'\n"
    asked = await broker.create(NewRequest("approval", hidden, None, 600))
    async with async_playwright() as playwright:
        browser, page = await _browser(playwright)
        await _log_in(page, base)
        await goto(page, f"{base}/inbox/requests/{asked['request_id']}")
        for label, (width, height) in SIZES.items():
            await page.set_viewport_size({"width": width, "height": height})
            buttons = await page.evaluate(BUTTONS)
            shown = [p for p in await page.evaluate(PLACES, ["#message", DESTRUCTIVE]) if p["shown"]]
            assert shown, f"{DESTRUCTIVE!r} is nowhere to be seen at {label}"
            for place in shown:
                assert place["clips"] == [] and place["bottom"] <= buttons, (label, place, buttons)
        await browser.close()
