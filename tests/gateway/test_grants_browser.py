"""Standing grants made and revoked in real headless Chromium, against a real ``baton serve --http`` with a live
gateway adapter: a person logged in with a passkey approves a transfer with "Approve and allow…" on the request
page; the next matching call runs without asking and its ``gateway_call`` receipt names the grant; the person
revokes it in the console's Grants page and the next call asks again. The option is absent on a signed link's
page and for a quorum's call, and a step-up tool's grant needs the step-up. Screenshots of the request page
with the option and of the console's Grants page go to tmp_path (and to docs/console/ when
BATON_CONSOLE_SCREENSHOTS names that directory).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli
from tests.conftest import baton_environ, call
from tests.hitl.helpers import HttpServer, goto, pending_requests
from tests.hitl.layout import SIZES, check_sizes
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    _agent,
    _enroll_and_log_in,
    _enrollment_link,
    _local,
    _person,
)

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.needs("chromium")]

TOOLS = [
    tool("transfer", to="string", amount="integer"),
    tool("wire", to="string"),
    tool("payout", to="string"),
]
TO_BOB = 'context.arguments.to == "bob"'


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], HttpServer]]:
    """``baton serve --http`` over a store with the ``db`` adapter live: ``transfer`` needs one person,
    ``wire`` a person's passkey step-up, ``payout`` two people."""
    root = tmp_path_factory.mktemp("grants-ui")
    env = baton_environ(
        root / "home",
        HITL_TIMEOUT_SECONDS="3600",
        BATON_HTTP_TOKEN=AGENT_TOKEN,
        BATON_ADMIN_TOKEN=ADMIN_TOKEN,
    )
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(
            load_settings({"BATON_HOME": env["BATON_HOME"], "BATON_NPM_REGISTRY": registry.url})
        )
        try:
            make_live(
                runtime,
                document("db", publish(registry), TOOLS),
                allowed=["transfer", "wire", "payout"],
                approval_required=["transfer", "wire", "payout"],
                step_up=["wire"],
                required_approvals={"payout": 2},
            )
        finally:
            runtime.close()
    server = HttpServer(env, root / "http.log")
    try:
        yield env, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        await launched.close()


@pytest.fixture(scope="module")
async def alice(served: tuple[dict[str, str], HttpServer], browser: Any) -> AsyncIterator[Any]:
    """Alice's page, enrolled and logged in with her passkey."""
    env, server = served
    base = _local(server.base_url)
    context, page = await _person(browser)
    await _enroll_and_log_in(page, _enrollment_link(env, base, "alice"), base, "alice")
    yield page
    await context.close()


def receipts(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind=kind)]
    finally:
        runtime.close()


def hitl(env: dict[str, str], *args: str) -> str:
    done = run_cli(env, "hitl", *args)
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


async def asking(session: Any, name: str, arguments: dict[str, Any], into: dict[str, Any]) -> None:
    into.update(await call(session, f"db__{name}", arguments))


async def settled(result: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(300):  # only stops a hang
        while not result:
            await anyio.sleep(0.05)
    return result


def keep(shots: Path) -> None:
    """Copy the screenshots to BATON_CONSOLE_SCREENSHOTS when it names a directory (docs/console/)."""
    target = os.environ.get("BATON_CONSOLE_SCREENSHOTS")
    if target:
        for shot in shots.glob("*.png"):
            shutil.copy(shot, Path(target) / shot.name)


async def operator_cannot_grant(base_url: str, request_id: str) -> None:
    """The operator's token names nobody: its page offers no grant, and a forged grant post is refused."""
    import httpx

    bearer = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=base_url, headers=bearer, timeout=60) as operator:
        shown = await operator.get(f"/inbox/requests/{request_id}")
        assert shown.status_code == 200 and 'id="decide"' in shown.text and "approve-grant" not in shown.text
        found = re.search(r'name="csrf" value="([^"]+)"', shown.text)
        assert found is not None
        forced = await operator.post(
            f"/inbox/requests/{request_id}/decide",
            data={"csrf": found.group(1), "action": "approve_grant", "grant_for": "900"},
            headers={"Origin": base_url},
        )
    assert forced.status_code == 403 and "hitl_decider_not_authorized" in forced.text


async def test_a_person_grants_on_the_request_page_and_revokes_in_the_console(
    served: tuple[dict[str, str], HttpServer], alice: Any, tmp_path: Path
) -> None:
    env, server = served
    base = _local(server.base_url)
    shots = tmp_path / "shots"
    shots.mkdir()
    first: dict[str, Any] = {}
    async with _agent(server.base_url) as session:
        async with anyio.create_task_group() as group:
            group.start_soon(asking, session, "transfer", {"to": "bob", "amount": 5}, first)
            (pending,) = await pending_requests(session)
            await goto(alice, f"{base}/inbox/requests/{pending['request_id']}")
            assert await alice.text_content("#grant-tool") == "db · transfer"
            await alice.fill("#grant_uses", "3")
            await alice.click("#grant-condition summary")
            await alice.fill("#grant_when", TO_BOB)
            await check_sizes(alice, shots, "request-grant", request_page=True)
            await alice.select_option("#grant_for", "3600")
            await alice.click("#approve-grant")
            await alice.wait_for_selector("#status.approved")
        assert (await settled(first))["success"] is True
        (grant,) = [
            g for g in receipts(env, "hitl_grant_created") if g["request_id"] == pending["request_id"]
        ]
        # every passkey approval carries a fresh assertion bound to the request, so its grant counts as stepped up
        assert (grant["granted_by"], grant["granted_via"], grant["step_up"]) == ("alice", "passkey", True)
        assert (grant["condition"], grant["max_uses"]) == (TO_BOB, 3)

        covered = await call(session, "db__transfer", {"to": "bob", "amount": 7})
        assert covered["success"] is True and covered["approval"]["grant_id"] == grant["grant_id"]
        last_call = [r for r in receipts(env, "gateway_call") if r["tool"] == "transfer"][-1]
        assert last_call["approval"]["grant_id"] == grant["grant_id"]

        await goto(alice, f"{base}/inbox/console/grants")
        row = alice.locator(f"#grants tr[data-grant-id='{grant['grant_id']}']")
        assert "1 / 3" in await row.inner_text() and "alice" in await row.inner_text()
        await check_sizes(alice, shots, "console-grants")
        await row.locator("button.revoke").click()
        await row.wait_for(state="detached")
        await alice.click("#show-ended")
        ended = alice.locator(f"#grants tr[data-grant-id='{grant['grant_id']}']")
        assert await ended.get_attribute("data-status") == "revoked"
        assert "revoked by alice" in await ended.inner_text()
        revoked = [r for r in receipts(env, "hitl_grant_revoked") if r["grant_id"] == grant["grant_id"]]
        assert revoked == [{"grant_id": grant["grant_id"], "revoked_by": "alice"}]

        again: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(asking, session, "transfer", {"to": "bob", "amount": 9}, again)
            (asked,) = await pending_requests(session)
            hitl(env, "reject", asked["request_id"])
        assert again["error_class"] == "approval_denied"
    keep(shots)
    assert sorted(p.name for p in shots.iterdir()) == sorted(
        f"{name}-{size}.png" for name in ("request-grant", "console-grants") for size in SIZES
    )


async def test_no_grant_is_offered_on_a_link_page_or_for_a_quorum(
    served: tuple[dict[str, str], HttpServer], alice: Any, browser: Any
) -> None:
    env, server = served
    base = _local(server.base_url)
    results: dict[str, dict[str, Any]] = {"transfer": {}, "payout": {}}
    async with _agent(server.base_url) as session, anyio.create_task_group() as group:
        group.start_soon(asking, session, "transfer", {"to": "carol", "amount": 1}, results["transfer"])
        group.start_soon(asking, session, "payout", {"to": "carol"}, results["payout"])
        ids = {r["context"]["tool"]: r["request_id"] for r in await pending_requests(session, 2)}
        await goto(alice, f"{base}/inbox/requests/{ids['transfer']}")
        assert await alice.locator("#approve-grant").count() == 1  # the same person, a one-person call
        await goto(alice, f"{base}/inbox/console/requests/{ids['transfer']}")
        assert await alice.locator("#approve-grant").count() == 1  # the console's view of it too
        await goto(alice, f"{base}/inbox/requests/{ids['payout']}")
        assert await alice.locator("#decide button.approve").count() == 1
        assert await alice.locator("#grant, #approve-grant").count() == 0

        link = hitl(env, "link", ids["transfer"], "--base-url", base).strip()
        holder = await browser.new_context()
        page = await holder.new_page()
        await goto(page, link)
        assert await page.locator("#decide button.approve").count() == 1
        assert await page.locator("#grant, #approve-grant").count() == 0
        # a link holder who forges the grant's action is refused: a link names nobody
        await page.evaluate(
            """() => { document.querySelector("#decide button.approve").value = "approve_grant"; }"""
        )
        await page.click("#decide button.approve")
        await page.wait_for_selector("#error-class")
        assert await page.text_content("#error-class") == "hitl_response_invalid"
        await holder.close()
        await operator_cannot_grant(server.base_url, ids["transfer"])
        for request_id in ids.values():
            hitl(env, "reject", request_id)
    assert results["transfer"]["error_class"] == results["payout"]["error_class"] == "approval_denied"
    assert not [g for g in receipts(env, "hitl_grant_created") if g["request_id"] in ids.values()]


async def test_a_step_up_tools_grant_needs_the_step_up(
    served: tuple[dict[str, str], HttpServer], alice: Any, tmp_path: Path
) -> None:
    env, server = served
    base = _local(server.base_url)
    first: dict[str, Any] = {}
    async with _agent(server.base_url) as session:
        async with anyio.create_task_group() as group:
            group.start_soon(asking, session, "wire", {"to": "dora"}, first)
            (pending,) = await pending_requests(session)
            url = f"{base}/inbox/requests/{pending['request_id']}"
            await goto(alice, url)
            assert await alice.text_content("#approve-grant") == "Approve with passkey and allow"
            await check_sizes(alice, tmp_path, "step-up-grant", request_page=True)
            keep(tmp_path)
            csrf = await alice.get_attribute("#decide input[name=csrf]", "value")
            bare = await alice.context.request.post(
                f"{url}/decide",
                form={"csrf": csrf or "", "action": "approve_grant", "grant_for": "900", "grant_uses": "2"},
                headers={"Origin": base},
            )
            assert bare.status == 403 and "hitl_step_up_required" in await bare.text()
            status = await call(session, "mcp_get_request_status", {"request_id": pending["request_id"]})
            assert status["status"] == "pending"
            await goto(alice, url)
            await alice.fill("#grant_uses", "2")
            await alice.click("#approve-grant")
            await alice.wait_for_selector("#status.approved")
        assert (await settled(first))["success"] is True
        (grant,) = [
            g for g in receipts(env, "hitl_grant_created") if g["request_id"] == pending["request_id"]
        ]
        assert grant["step_up"] is True and grant["tool"] == "wire"
        covered = await call(session, "db__wire", {"to": "dora"})
        assert covered["success"] is True and covered["approval"]["grant_id"] == grant["grant_id"]
