"""One public address: a real ``baton serve --http 127.0.0.1:0`` names its real port at ``localhost``, the
enrollment link of ``baton people add`` in another process points there, and an enrollment page opened at
the IP address says where passkeys work instead of failing with a bare SecurityError (real Chromium)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_process import run_cli
from tests.hitl.helpers import goto
from tests.hitl.layout import check_sizes
from tests.hitl.test_decide_pages_browser import _keep
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import _person
from tests.test_serve_terminal import read_stderr_until

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]


async def test_the_enrollment_link_names_the_real_port_at_localhost_and_an_ip_page_says_where_to_go(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {key: value for key, value in baton_env.items() if key != "BATON_PUBLIC_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", "serve", "--http", "127.0.0.1:0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        announced = read_stderr_until(process, b"Ctrl-C stops it.").decode()
        found = re.search(r"listening on (http://localhost:(\d+))", announced)
        assert found is not None, announced
        base, port = found.group(1), found.group(2)
        assert port != "0"
        added = run_cli(env, "people", "add", "alice")
        assert added.returncode == 0, added.stderr
        (link,) = [line.strip() for line in added.stdout.splitlines() if "/inbox/enroll?" in line]
        assert link.startswith(f"{base}/inbox/enroll?")
        at_ip = link.replace("localhost", "127.0.0.1", 1)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            context, page = await _person(browser)
            await goto(page, at_ip)
            hint = await page.text_content("#passkey-host")
            assert hint is not None and "need a host name" in hint and link in hint
            await check_sizes(page, tmp_path, "enroll-at-ip", decide="#passkey-host a")
            await page.click("#passkey-host a")
            await page.wait_for_selector("#enroll button")
            assert page.url == link
            assert await page.locator("#passkey-host").count() == 0
            await page.click("#enroll button")
            await page.wait_for_selector("#title")
            assert await page.text_content("#title") == "Passkey registered"
            await context.close()
            await browser.close()
    finally:
        process.terminate()
        process.communicate(timeout=300)
    _keep(tmp_path)
