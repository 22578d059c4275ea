"""A request opened from its signed link, in real headless Chromium against a real ``baton serve --http``:
a step-up or a quorum offers "Log in with your passkey", and the login comes back to the request.

Screenshots go to /work/shots when that directory exists (and to tmp_path always).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli_process import run_cli
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.layout import check_sizes
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    _agent,
    _ask,
    _enrollment_link,
    _local,
    _person,
    _settled,
)

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]
SHOTS = Path("/work/shots")


def _signed_link(env: dict[str, str], base: str, request_id: str) -> str:
    done = run_cli(env, "hitl", "link", request_id, "--base-url", base)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().replace("\n", "")


def _keep(shots: Path) -> None:
    if SHOTS.is_dir():
        for shot in shots.glob("*.png"):
            shutil.copy(shot, SHOTS / f"decide-{shot.name}")


async def test_a_step_up_opened_from_its_link_offers_a_passkey_login_that_returns_to_the_request(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = _local(server.base_url)
    enroll = _enrollment_link(env, base, "alice")
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        await goto(page, enroll)
        await page.click("#enroll button")
        await page.wait_for_selector("#title")  # enrolled, not logged in
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(session, result, request_message="Ship it?", context={"v": 3}, step_up=True)
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            link = await anyio.to_thread.run_sync(_signed_link, env, base, request_id)
            await goto(page, link)
            assert await page.text_content("#login-to-approve") == "Log in with your passkey"
            await check_sizes(page, tmp_path, "link-step-up", decide="#decide-buttons")
            await page.click("#login-to-approve")
            await page.wait_for_selector("#login-next")
            assert f"next=/inbox/requests/{request_id}" in page.url
            await check_sizes(page, tmp_path, "login-next", decide="#passkey-login button")
            await page.click("#passkey-login button")
            await page.wait_for_selector("#request-id")
            assert page.url == f"{base}/inbox/requests/{request_id}"
            await page.click("button.approve")  # the step-up assertion, as alice
            await page.wait_for_selector("#status.approved")
            assert await page.text_content("#decided-by") == "alice"
            assert (await _settled(result))["approved"] is True
        await context.close()
        await browser.close()
    _keep(tmp_path)


async def test_a_quorum_opened_from_its_link_offers_the_passkey_login_instead_of_an_anonymous_approve(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = _local(server.base_url)
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, result, request_message="Rotate", required_approvals=2))
            request_id = (await pending_requests(session))[0]["request_id"]
            link = await anyio.to_thread.run_sync(_signed_link, env, base, request_id)
            await goto(page, link)
            assert await page.get_attribute("#login-to-approve", "href") == (
                f"/inbox/login?next=/inbox/requests/{request_id}"
            )
            assert await page.locator("button.approve").count() == 0
            await page.click("button.reject")
            await page.wait_for_selector("#title")
            assert (await _settled(result))["approved"] is False
        await context.close()
        await browser.close()


async def _authenticated(browser: Any) -> tuple[Any, Any, Any, str]:
    """A browser context with its own virtual authenticator: the context, its page, CDP and the
    authenticator's id."""
    from tests.hitl.test_people_browser import AUTHENTICATOR

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    return context, page, cdp, added["authenticatorId"]


async def _credential_id(cdp: Any, authenticator: str) -> str:
    """The base64url id of the one credential a virtual authenticator holds."""
    (credential,) = (await cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator}))[
        "credentials"
    ]
    return str(credential["credentialId"]).replace("+", "-").replace("/", "_").rstrip("=")


async def _log_in(page: Any, base: str) -> None:
    await goto(page, f"{base}/inbox/login")
    await page.click("#passkey-login button")
    await page.wait_for_selector("#title, #me")


async def test_one_lost_passkey_is_revoked_alone_its_session_ends_and_it_no_longer_logs_in(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    import json

    from playwright.async_api import async_playwright

    from baton.config import load_settings
    from baton.runtime import Runtime

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = _local(server.base_url)
    links = [_enrollment_link(env, base, "alice")]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        laptop, phone = await _authenticated(browser), await _authenticated(browser)
        for index, (_context, page, _cdp, _id) in enumerate((laptop, phone)):
            if index:
                done = run_cli(env, "people", "enroll", "alice", "--url", base)
                links.append(next(line for line in done.stdout.splitlines() if "/inbox/enroll?" in line))
            await goto(page, links[index].strip())
            await page.click("#enroll button")
            await page.wait_for_selector("#title")
            await _log_in(page, base)
            assert await page.text_content("#me") == "alice · passkey"
        lost = await _credential_id(laptop[2], laptop[3])
        listed = run_cli(env, "people", "passkeys", "alice", "--json")
        assert listed.returncode == 0, listed.stderr
        assert lost in [p["credential_id"] for p in json.loads(listed.stdout)]
        assert len(json.loads(listed.stdout)) == 2

        revoked = run_cli(env, "people", "revoke-passkey", "alice", lost[:12])
        assert revoked.returncode == 0, revoked.stderr
        again = run_cli(env, "people", "revoke-passkey", "alice", lost[:12])
        assert again.returncode == 1 and "passkey_not_found" in again.stderr

        await goto(laptop[1], f"{base}/inbox")  # the session opened with the lost passkey ended
        assert "/inbox/login" in laptop[1].url
        await _log_in(laptop[1], base)  # and the lost passkey no longer logs in
        assert await laptop[1].text_content("#error-class") == "passkey_invalid"
        await goto(phone[1], f"{base}/inbox")  # the other passkey's session stands
        assert await phone[1].text_content("#me") == "alice · passkey"
        await browser.close()
    runtime = Runtime.open(load_settings(env))
    try:
        (receipt,) = runtime.receipts.list(kind="passkey_revoked")
    finally:
        runtime.close()
    assert receipt.payload["person"] == "alice" and lost not in json.dumps(receipt.payload)
