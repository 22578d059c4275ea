"""The console says what the store says: its Receipts page agrees with ``baton receipts verify``, and its
decided list is in decision order. Real ``baton serve --http`` processes, real CLI processes, real HTTP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from baton.config import load_settings
from baton.hitl.broker import NewRequest, get_broker
from baton.runtime import Runtime
from tests.cli_process import run_cli
from tests.hitl.layout import check_sizes
from tests.hitl.test_decide_pages_browser import _keep
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS

ADMIN_TOKEN = "truth-admin-token-fedcba9876543210"


def _console(base_url: str, path: str) -> str:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        page = client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert page.status_code == 200, page.text
    return page.text


def _ask(env: dict[str, str], *messages: str) -> list[str]:
    runtime = Runtime.open(load_settings(env))
    broker = get_broker(runtime)

    async def make(message: str) -> str:
        return str((await broker.create(NewRequest("approval", message, timeout_seconds=600)))["request_id"])

    try:
        return [anyio.run(make, message) for message in messages]
    finally:
        runtime.close()


async def _shoot(base_url: str, path: str, name: str, shots: Path, token: str = ADMIN_TOKEN) -> None:
    """Screenshots of a page at both sizes, logged in with the operator's token."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = await browser.new_page()
        await page.goto(f"{base_url}{path}")  # to the login, which comes back to the page
        await page.fill("#token", token)
        async with page.expect_navigation():
            await page.click("#login button")
        assert page.url == f"{base_url}{path}", page.url
        await check_sizes(page, shots, name)
        await browser.close()


@pytest.mark.anyio
@pytest.mark.needs("chromium")
async def test_the_receipts_page_counts_the_signed_checkpoints_that_receipts_verify_verifies(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN, "BATON_CHECKPOINT_INTERVAL_SECONDS": "3600"}
    assert run_cli(env, "people", "add", "ada").returncode == 0
    http_server_factory(env).stop()  # a serving baton signs the head at shutdown
    verified = run_cli(env, "receipts", "verify")
    assert verified.returncode == 0, verified.stderr
    found = re.search(r"checkpoints: (\d+) signed checkpoints verified", verified.stdout)
    anchored = re.search(r"anchored up to seq (\d+)", verified.stdout)
    assert found is not None and anchored is not None, verified.stdout
    server = http_server_factory(env)
    page = _console(server.base_url, "/inbox/console/receipts")
    assert "No signed checkpoint" not in page
    assert f"{found.group(1)} signed checkpoint" in page
    assert f"anchored up to seq {anchored.group(1)}" in page
    await _shoot(server.base_url, "/inbox/console/receipts", "console-receipts", tmp_path)
    _keep(tmp_path)


def test_the_decided_list_puts_the_latest_decision_first_whatever_the_order_of_asking(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    env = {**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    first_asked, second_asked, third_asked = _ask(env, "first asked", "second asked", "third asked")
    for request_id in (second_asked, third_asked, first_asked):  # decision order
        done = run_cli(env, "hitl", "approve", request_id)
        assert done.returncode == 0, done.stderr
    page = _console(http_server_factory(env).base_url, "/inbox/console/requests")
    decided = page.split('id="decided"', 1)[1]
    rows = re.findall(r'data-request-id="([^"]+)"', decided)
    assert rows == [first_asked, third_asked, second_asked]
