"""What a passkey proves, in real headless Chromium against a real ``baton serve --http``: whose it is,
that the person verified themselves, and that the person still exists.

Each person is a browser context with its own CDP virtual authenticator. A tampering client is the page
itself: its ``data-options`` rewritten before the ceremony, or a credential made in one person's browser
posted from another's session. Each test kills a hand-made mutant of ``hitl/passkeys.py`` or
``hitl/inbox_access.py`` (docs/testing.md, "Promises and the tests that hold them").
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from tests.cli_process import run_cli
from tests.conftest import call
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    AUTHENTICATOR,
    _agent,
    _ask,
    _enroll_and_log_in,
    _enrollment_link,
    _error_class,
    _local,
    _person,
    _settled,
)

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]

#: A client that asks its authenticator for no user verification (the server asked for it).
NO_USER_VERIFICATION = """(selector) => {
  const form = document.querySelector(selector);
  const options = JSON.parse(form.dataset.options);
  const selection = options.authenticatorSelection;
  if (selection) {  // Chromium makes no discoverable credential without verifying: a plain one then
    Object.assign(selection, { userVerification: "discouraged", residentKey: "discouraged" });
    selection.requireResidentKey = false;
  } else options.userVerification = "discouraged";
  form.dataset.options = JSON.stringify(options);
}"""


def _env(baton_env: dict[str, str]) -> dict[str, str]:
    return {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}


async def _unverified_person(browser: Any) -> tuple[Any, Any, Any]:
    """A person's context, page and a switch that stops their authenticator verifying them (a key whose PIN
    was never asked, a skipped biometric)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})

    async def stop_verifying() -> None:
        await cdp.send(
            "WebAuthn.setUserVerified",
            {"authenticatorId": added["authenticatorId"], "isUserVerified": False},
        )

    return context, page, stop_verifying


async def _captured_decision(page: Any, url: str) -> dict[str, str]:
    """The decide form ``page`` posts after its passkey ceremony at ``url``, held back from the server."""
    posted: dict[str, str] = {}
    seen = anyio.Event()

    async def hold(route: Any) -> None:
        fields = parse_qs(route.request.post_data or "", keep_blank_values=True)
        posted.update({key: values[0] for key, values in fields.items()})
        seen.set()
        await route.abort()

    await page.route("**/decide", hold)
    await goto(page, url)
    await page.click("button.approve")
    with anyio.fail_after(300):  # only stops a hang
        await seen.wait()
    await page.unroute("**/decide")
    return posted


async def test_a_step_up_made_with_another_persons_passkey_never_approves(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """The ceremony binds the request, not the person: the assertion's passkey must be the decider's."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    links = {name: _enrollment_link(env, base, name) for name in ("alice", "bob")}
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        people = {name: await _person(browser) for name in links}
        for name, (_context, page) in people.items():
            await _enroll_and_log_in(page, links[name], base, name)
        (alice_context, alice), (bob_context, bob) = people["alice"], people["bob"]
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, result, request_message="Wire EUR 9000", step_up=True))
            request_id = (await pending_requests(session))[0]["request_id"]
            page_url = f"{base}/inbox/requests/{request_id}"
            await goto(bob, page_url)
            bob_csrf = await bob.get_attribute("#decide input[name=csrf]", "value")
            signed_by_alice = await _captured_decision(alice, page_url)
            assert signed_by_alice["credential"] and signed_by_alice["ceremony"]
            answer = await bob_context.request.post(
                f"{page_url}/decide",
                form={**signed_by_alice, "csrf": bob_csrf, "action": "approve"},
                headers={"Origin": base},
            )
            assert answer.status == 403 and "passkey_invalid" in await answer.text()
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and result == {}
            await goto(bob, page_url)
            await bob.click("button.reject")
            await bob.wait_for_selector("#status.rejected")
        assert (await _settled(result))["approved"] is False
        await alice_context.close()
        await bob_context.close()
        await browser.close()


async def test_a_passkey_used_without_user_verification_neither_enrolls_nor_logs_in(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """Possession alone is not a person: an assertion or a new credential without the UV flag is refused,
    whatever the page asked its authenticator for."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page, stop_verifying = await _unverified_person(browser)
        await _enroll_and_log_in(page, _enrollment_link(env, base, "alice"), base, "alice")
        await page.click("form[action='/inbox/logout'] button")
        await page.wait_for_url("**/inbox/login")
        await stop_verifying()
        await page.evaluate(NO_USER_VERIFICATION, "#passkey-login")
        await page.click("#passkey-login button")
        assert await _error_class(page) == "passkey_invalid"
        assert "User verification is required" in (await page.text_content("body") or "")
        await goto(page, f"{base}/inbox")
        assert urlsplit(page.url).path == "/inbox/login"  # no session was opened

        # a security key that cannot verify anyone (no PIN, no biometric) enrolls nobody either
        key_context = await browser.new_context()
        key = await key_context.new_page()
        cdp = await key_context.new_cdp_session(key)
        await cdp.send("WebAuthn.enable")
        without_uv = {**AUTHENTICATOR, "hasUserVerification": False, "isUserVerified": False}
        await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": without_uv})
        await goto(key, _enrollment_link(env, base, "bob"))
        await key.evaluate(NO_USER_VERIFICATION, "#enroll")
        await key.click("#enroll button")
        assert await _error_class(key) == "passkey_invalid"
        await context.close()
        await key_context.close()
        await browser.close()
    listed = run_cli(env, "people", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {p["name"]: p["passkeys"] for p in json.loads(listed.stdout)} == {"alice": 1, "bob": 0}


async def test_a_removed_persons_session_opens_nothing_and_decides_nothing(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """``baton people remove`` ends the person's open sessions: the cookie they hold is worth nothing."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    link = _enrollment_link(env, base, "alice")
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        await _enroll_and_log_in(page, link, base, "alice")
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, result, request_message="Restart the cluster"))
            request_id = (await pending_requests(session))[0]["request_id"]
            page_url = f"{base}/inbox/requests/{request_id}"
            await goto(page, page_url)
            csrf = await page.get_attribute("#decide input[name=csrf]", "value")
            removed = await anyio.to_thread.run_sync(run_cli, env, "people", "remove", "alice")
            assert removed.returncode == 0, removed.stderr
            for url in (f"{base}/inbox", page_url):
                await goto(page, url)
                assert urlsplit(page.url).path == "/inbox/login", url
            answer = await context.request.post(
                f"{page_url}/decide",
                form={"csrf": csrf, "action": "approve"},
                headers={"Origin": base},
            )
            assert answer.status == 401 and "hitl_unauthorized" in await answer.text()
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and result == {}
            rejected = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
            assert rejected.returncode == 0, rejected.stderr
        assert (await _settled(result))["decided_via"] == "cli"
        await context.close()
        await browser.close()


async def test_a_step_up_ceremony_made_for_one_request_never_approves_a_twin(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """Two requests with the same arguments share a digest: the ceremony's request id is what tells their
    step-ups apart, so one's assertion and ceremony posted to the other are refused."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    link = _enrollment_link(env, base, "alice")
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        await _enroll_and_log_in(page, link, base, "alice")
        first: dict[str, Any] = {}
        second: dict[str, Any] = {}
        same = {"request_message": "Pay invoice 7", "context": {"to": "acme"}, "step_up": True}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, first, **same))
            a = (await pending_requests(session, 1))[0]["request_id"]
            group.start_soon(lambda: _ask(session, second, **same))
            (b,) = {r["request_id"] for r in await pending_requests(session, 2)} - {a}
            await goto(page, f"{base}/inbox/requests/{b}")
            csrf_b = await page.get_attribute("#decide input[name=csrf]", "value")
            made_for_a = await _captured_decision(page, f"{base}/inbox/requests/{a}")
            answer = await context.request.post(
                f"{base}/inbox/requests/{b}/decide",
                form={**made_for_a, "csrf": csrf_b, "action": "approve"},
                headers={"Origin": base},
            )
            assert answer.status == 403 and "passkey_invalid" in await answer.text()
            assert first == {} and second == {}
            for request_id in (a, b):
                await goto(page, f"{base}/inbox/requests/{request_id}")
                await page.click("button.reject")
                await page.wait_for_selector("#status.rejected")
        assert (await _settled(first))["approved"] is False
        assert (await _settled(second))["approved"] is False
        await context.close()
        await browser.close()


async def test_a_passkey_login_answer_opens_one_session_only(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """A captured login answer (ceremony and assertion) replayed is refused: its nonce was spent."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    link = _enrollment_link(env, base, "alice")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        await goto(page, link)
        await page.click("#enroll button")
        await page.wait_for_selector("#title")
        posted: dict[str, str] = {}
        seen = anyio.Event()

        async def hold(route: Any) -> None:
            posted.update({k: v[0] for k, v in parse_qs(route.request.post_data or "").items()})
            seen.set()
            await route.abort()

        await page.route("**/inbox/login/passkey", hold)
        await goto(page, f"{base}/inbox/login")
        await page.click("#passkey-login button")
        with anyio.fail_after(300):  # only stops a hang
            await seen.wait()
        outcomes = []
        for _ in range(2):
            answer = await browser.new_context()
            sent = await answer.request.post(
                f"{base}/inbox/login/passkey", form=posted, headers={"Origin": base}, max_redirects=0
            )
            outcomes.append((sent.status, "baton_inbox=" in sent.headers.get("set-cookie", "")))
            await answer.close()
        assert outcomes[0] == (303, True)
        assert outcomes[1][0] == 403 and outcomes[1][1] is False
        await context.close()
        await browser.close()


async def test_a_removed_persons_session_stays_dead_when_the_name_is_added_again(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    """The session was alice's, not the name's: a new ``alice`` (a new enrollment, a new passkey) does
    not bring the removed one's open session back."""
    from playwright.async_api import async_playwright

    env = _env(baton_env)
    server = http_server_factory(env)
    base = _local(server.base_url)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        old_context, old = await _person(browser)
        await _enroll_and_log_in(old, _enrollment_link(env, base, "alice"), base, "alice")
        removed = run_cli(env, "people", "remove", "alice")
        assert removed.returncode == 0, removed.stderr
        new_context, new = await _person(browser)
        await _enroll_and_log_in(new, _enrollment_link(env, base, "alice"), base, "alice")
        await goto(old, f"{base}/inbox")
        assert urlsplit(old.url).path == "/inbox/login"
        await goto(new, f"{base}/inbox")  # the new alice's own session is alive
        assert await new.text_content("#me") == "alice · passkey"
        await old_context.close()
        await new_context.close()
        await browser.close()
