"""People with passkeys in real headless Chromium: enrollment by link, passkey login, step-up and quorum.

Each person is a browser context with its own CDP virtual authenticator (CTAP2, internal, resident keys,
user verification). The inbox is opened at ``localhost`` (an IP address is no WebAuthn relying party).
The agent asks over MCP with the agent's token; only the people's passkeys decide.
Screenshots of the enrollment, login and step-up pages go to tmp_path (and to docs/console/ when
BATON_CONSOLE_SCREENSHOTS names that directory).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.config import load_settings
from baton.runtime import Runtime
from tests.cli_process import run_cli
from tests.conftest import call
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.layout import SIZES, check_sizes
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS

AGENT_TOKEN = "people-agent-token-0123456789abcdef"
ADMIN_TOKEN = "people-admin-token-fedcba9876543210"
AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
}

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium")]


def _local(base_url: str) -> str:
    return base_url.replace("127.0.0.1", "localhost")


def _enrollment_link(env: dict[str, str], base: str, name: str, *extra: str) -> str:
    done = run_cli(env, "people", "add", name, "--url", base, *extra)
    assert done.returncode == 0, done.stderr
    (link,) = [line for line in done.stdout.splitlines() if "/inbox/enroll?" in line]
    return link.strip()


@asynccontextmanager
async def _agent(base_url: str) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with (
        http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _ask(session: ClientSession, into: dict[str, Any], **arguments: Any) -> None:
    into.update(await call(session, "mcp_request_admin_approval", {"timeout_seconds": 600, **arguments}))


async def _settled(result: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(300):
        while not result:
            await anyio.sleep(0.05)
    return result


async def _person(browser: Any) -> tuple[Any, Any]:
    """A browser context with its own virtual authenticator, and its page."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    return context, page


async def _enroll_and_log_in(page: Any, link: str, base: str, name: str) -> None:
    await goto(page, link)
    await page.click("#enroll button")
    await page.wait_for_selector("#title")
    assert await page.text_content("#title") == "Passkey registered"
    await goto(page, f"{base}/inbox/login")
    await page.click("#passkey-login button")
    await page.wait_for_selector("#me")
    assert await page.text_content("#me") == f"{name} · passkey"


async def _error_class(page: Any) -> str | None:
    await page.wait_for_selector("#title")
    text: str | None = await page.text_content("#error-class")
    return text


def runtime_logins(env: dict[str, str]) -> list[Any]:
    """The ``inbox_login`` receipts of the store (who opened a session, and how)."""
    runtime = Runtime.open(load_settings(env))
    try:
        return list(runtime.receipts.list(kind="inbox_login"))
    finally:
        runtime.close()


async def test_enroll_by_link_log_in_by_passkey_and_approve_with_a_bound_step_up(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    base = _local(server.base_url)
    shots = tmp_path / "shots"
    shots.mkdir()
    link = _enrollment_link(env, base, "alice")
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context, page = await _person(browser)
        await goto(page, link)
        assert await page.text_content("#person") == "alice"
        await check_sizes(page, shots, "enroll", decide="#enroll button")
        await page.click("#enroll button")
        await page.wait_for_selector("#title")
        assert await page.text_content("#title") == "Passkey registered"
        reused = await goto(page, link)
        assert reused is not None and reused.status == 403
        assert await page.text_content("#error-class") == "enrollment_link_invalid"

        await goto(page, f"{base}/inbox")
        assert page.url.endswith("/inbox/login")
        await check_sizes(page, shots, "login", decide="#passkey-login button")
        await page.click("#passkey-login button")
        await page.wait_for_selector("#me")
        assert await page.text_content("#me") == "alice · passkey"

        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(
                    session, result, request_message="Deploy v2?", context={"env": "prod"}, step_up=True
                )
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            await goto(page, f"{base}/inbox/requests/{request_id}")
            assert await page.is_visible("#step-up-note")
            await page.fill("#admin_notes", "Checked the diff.")
            await check_sizes(page, shots, "step-up", request_page=True)
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            assert await page.text_content("#decided-by") == "alice"
            assert (await _settled(result))["approved"] is True
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        assert (status["decided_by"], status["decided_via"], status["step_up"]) == ("alice", "passkey", True)
        await context.close()
        await browser.close()

    runtime = Runtime.open(load_settings(env))
    decided = [r.payload for r in runtime.receipts.list(kind="hitl_decided")]
    kinds = {r.kind for r in runtime.receipts.list(limit=1000)}
    runtime.close()
    assert decided[-1]["decided_by"] == "alice" and decided[-1]["step_up"] is True
    assert {"person_added", "passkey_registered", "inbox_login"} <= kinds
    logins = [r.payload for r in runtime_logins(env)]
    assert logins == [{"person": "alice", "via": "passkey"}]
    target = os.environ.get("BATON_CONSOLE_SCREENSHOTS")
    if target:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(target) / shot.name)
    assert sorted(p.name for p in shots.iterdir()) == sorted(
        f"{page}-{size}.png" for page in ("enroll", "login", "step-up") for size in SIZES
    )


async def test_a_step_up_is_refused_without_an_assertion_or_with_one_for_another_request(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
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
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(session, first, request_message="Pay A", context={"to": "a"}, step_up=True)
            )
            group.start_soon(
                lambda: _ask(session, second, request_message="Pay B", context={"to": "b"}, step_up=True)
            )
            listed = await pending_requests(session, 2)
            ids = {r["message"]: r["request_id"] for r in listed}
            a, b = ids["Pay A"], ids["Pay B"]

            # 1. no assertion at all: a plain approve from the logged-in person
            await goto(page, f"{base}/inbox/requests/{b}")
            csrf_b = await page.get_attribute("#decide input[name=csrf]", "value")
            ceremony_b = await page.get_attribute("#decide input[name=ceremony]", "value")
            plain = await context.request.post(
                f"{base}/inbox/requests/{b}/decide",
                form={"csrf": csrf_b, "action": "approve"},
                headers={"Origin": base},
            )
            assert plain.status == 403 and "hitl_step_up_required" in await plain.text()

            # 2. A's assertion (A's ceremony) posted to B
            await goto(page, f"{base}/inbox/requests/{a}")
            await page.evaluate(
                "([action, csrf]) => { const f = document.querySelector('#decide'); f.action = action;"
                " f.elements.csrf.value = csrf; }",
                [f"/inbox/requests/{b}/decide", csrf_b],
            )
            await page.click("button.approve")
            assert await _error_class(page) == "passkey_invalid"

            # 3. A's assertion under B's ceremony: the challenge binds A's id and digest, not B's
            await goto(page, f"{base}/inbox/requests/{a}")
            await page.evaluate(
                "([action, csrf, ceremony]) => { const f = document.querySelector('#decide'); f.action = action;"
                " f.elements.csrf.value = csrf; f.elements.ceremony.value = ceremony; }",
                [f"/inbox/requests/{b}/decide", csrf_b, ceremony_b],
            )
            await page.click("button.approve")
            assert await _error_class(page) == "passkey_invalid"

            # the operator's token and the CLI cannot make a passkey assertion either
            admin = await context.request.post(
                f"{base}/inbox/requests/{b}/decide",
                form={"action": "approve"},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Origin": base},
            )
            assert admin.status == 403 and "hitl_step_up_required" in await admin.text()
            cli = await anyio.to_thread.run_sync(run_cli, env, "hitl", "approve", b)
            assert cli.returncode == 1 and "hitl_step_up_required" in cli.stderr
            assert first == {} and second == {}

            # B's own assertion approves B; rejecting A needs none
            await goto(page, f"{base}/inbox/requests/{b}")
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            await goto(page, f"{base}/inbox/requests/{a}")
            await page.click("button.reject")
            await page.wait_for_selector("#status.rejected")
        assert (await _settled(second))["approved"] is True
        assert (await _settled(first))["approved"] is False
        await context.close()
        await browser.close()


async def test_a_quorum_of_two_needs_two_distinct_people_and_one_rejection_rejects(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    from playwright.async_api import async_playwright

    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
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
        alice, bob = people["alice"][1], people["bob"][1]

        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(session, result, request_message="Rotate keys", required_approvals=2)
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            await goto(alice, f"{base}/inbox/requests/{request_id}")
            assert await alice.text_content("#quorum .quorum") == "0 of 2"
            await alice.click("button.approve")
            await alice.wait_for_selector("#counted")  # the page after the approval (#quorum is on both)
            assert await alice.text_content("#status") == "pending"
            assert await alice.text_content("#quorum .quorum") == "1 of 2"
            # her approval counted: the page says so and offers her no second Approve, only Reject
            assert (await alice.text_content("#counted") or "").startswith("Your approval counted (1 of 2)")
            assert await alice.locator("button.approve").count() == 0
            assert await alice.locator("button.reject").count() == 1
            await goto(alice, f"{base}/inbox")
            assert await alice.text_content(f"tr[data-request-id='{request_id}'] .quorum") == "1 of 2"
            assert result == {}  # one approval of two decides nothing
            await goto(alice, f"{base}/inbox/console/requests")
            assert (
                await alice.text_content(f"#pending tr[data-request-id='{request_id}'] .quorum") == "1 of 2"
            )
            await goto(bob, f"{base}/inbox/requests/{request_id}")
            await bob.click("button.approve")
            await bob.wait_for_selector("#status.approved")
            assert await bob.text_content("#decided-by") == "alice, bob"
            assert (await _settled(result))["approved"] is True
            await goto(bob, f"{base}/inbox/console/requests")
            decided_row = f"#decided tr[data-request-id='{request_id}'] .decided-by"
            assert await bob.text_content(decided_row) == "alice, bob"

        rejected: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: _ask(session, rejected, request_message="Drop table", required_approvals=2)
            )
            request_id = (await pending_requests(session))[0]["request_id"]
            await goto(alice, f"{base}/inbox/requests/{request_id}")
            await alice.click("button.approve")
            await alice.wait_for_selector("#counted")
            await goto(bob, f"{base}/inbox/requests/{request_id}")
            await bob.click("button.reject")
            await bob.wait_for_selector("#status.rejected")
            outcome = await _settled(rejected)
        assert outcome["approved"] is False and outcome["decision"] == "rejected"
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
        assert status["decided_by"] == "bob"
        for context, _page in people.values():
            await context.close()
        await browser.close()

    runtime = Runtime.open(load_settings(env))
    partial = [r.payload for r in runtime.receipts.list(kind="hitl_partial_approval")]
    runtime.close()
    assert [(p["decided_by"], p["approvals"], p["required_approvals"]) for p in partial] == [
        ("alice", 1, 2),
        ("alice", 1, 2),
    ]
    assert json.dumps(partial).count("passkey") == 2
