"""The request card (MCP Apps) in real headless Chromium, inside a host made of the ext-apps SDK's own host
pieces (``AppBridge`` and ``PostMessageTransport`` from ``@modelcontextprotocol/ext-apps`` on npm, bundled
by esbuild into a directory the test prepares), against a real ``baton serve --http``.

The host's MCP side is the official Python client over streamable HTTP, declaring the extension: it lists
the tools, reads the card's ``ui://`` resource, calls the approval tool, and proxies the card's own
``tools/call`` and ``resources/read`` (the bindings ``host.mjs`` calls). The person decides at baton's own
origin, logged in with a passkey (a CDP virtual authenticator), in another browser context.

Screenshots go to tmp_path (and to docs/apps/ when BATON_APPS_SCREENSHOTS names that directory).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.wire.apps import CARD_URI
from tests.hitl.apps_host import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    ASK,
    EVERY_MESSAGE,
    SIZES,
    Host,
    ask,
    host_session,
    log_in_person,
    publish,
    settled,
    stored,
    wire,
)
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.servers import free_port, http_server, uvicorn_in_thread

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium", "node", "npm-registry")]

HOST_SOURCES = Path(__file__).parent / "mcp_apps_host"
#: Only stops a hang (npm fetches five packages once; its cache keeps them).
HANG_GUARD_SECONDS = 600
#: Nothing in the card, agent text included, is wider than the frame the host gave it.
NO_SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"


@pytest.fixture(scope="module")
def host_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test host, built: the locked npm packages (npm ci, no install scripts), ``host.mjs`` bundled."""
    target = tmp_path_factory.mktemp("mcp-apps-host")
    for source in HOST_SOURCES.iterdir():
        shutil.copy(source, target / source.name)
    for command in (
        ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
        ["npx", "--no-install", "esbuild", "host.mjs", "--bundle", "--format=esm", "--outfile=host.js"],
    ):
        done = subprocess.run(
            command, cwd=target, capture_output=True, text=True, timeout=HANG_GUARD_SECONDS, check=False
        )
        assert done.returncode == 0, done.stderr
    return target


@pytest.fixture
def served(baton_env: dict[str, str], tmp_path: Path, host_bundle: Path) -> Iterator[dict[str, Any]]:
    """baton on loopback (its public address ``localhost``, where passkeys work) and the host's page."""
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    port = free_port()
    public = f"http://localhost:{port}"
    env = {
        **baton_env,
        "BATON_HTTP_TOKEN": AGENT_TOKEN,
        "BATON_ADMIN_TOKEN": ADMIN_TOKEN,
        "BATON_PUBLIC_URL": public,
    }
    pages = Starlette(routes=[Mount("/", StaticFiles(directory=host_bundle))])
    with http_server(env, f"127.0.0.1:{port}", tmp_path), uvicorn_in_thread(pages) as host_url:
        yield {"env": env, "public": public, "mcp": f"http://127.0.0.1:{port}/mcp", "host": host_url}


async def test_the_card_shows_the_request_in_a_real_apps_host_and_the_outcome_a_person_decided_at_baton(
    served: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    shots = tmp_path / "shots"
    shots.mkdir()
    async with host_session(served["mcp"]) as session, async_playwright() as playwright:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        for name in ("mcp_request_admin_approval", "mcp_request_admin_input"):
            assert (listed[name].meta or {})["ui"] == {"resourceUri": CARD_URI}
        assert not any(tool.meta for name, tool in listed.items() if "request_admin" not in name)
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        person, person_page = await log_in_person(browser, served["env"], served["public"])
        hosts = {size: await Host.open(browser, session, served["host"], size) for size in SIZES}
        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(ask, session, outcome)
            for host in hosts.values():
                await host.mount(listed["mcp_request_admin_approval"], ASK)
            for size, host in hosts.items():
                await host.card().locator("#countdown").wait_for()
                assert (await host.text("#request-id")).startswith("hr_")
                assert await host.text("#message") == ASK["request_message"]
                assert await host.text("#agent") == "http-agent"  # the agent baton knows, not a claim
                assert json.loads(await host.text("#context-json")) == ASK["context"]
                assert len(await host.text("#digest")) == 64
                assert await host.card().locator("#chip-urgent").is_visible()
                assert await host.text("#state") == "waiting for a person"
                assert await host.card().locator("#context-json *").count() == 0  # "<b>" stayed text
                assert await host.page.main_frame.child_frames[0].evaluate(NO_SIDEWAYS_SCROLL), size
                await host.shoot(shots, f"card-pending-{size}")
            request_id = await hosts["390"].text("#request-id")
            phone = hosts["390"]
            await phone.card().locator("#open-decision").click()
            with anyio.fail_after(60):  # only stops a hang
                await phone.linked.wait()
            assert phone.links == [f"{served['public']}/inbox/requests/{request_id}"]
            await person_page.goto(phone.links[0])
            await person_page.click("button.approve")
            await person_page.wait_for_selector("#status.approved")
            result = await settled(outcome)
            for size, host in hosts.items():
                await host.page.evaluate("(r) => window.sendToolResult(r)", result)
                await host.card().locator("#outcome-status.approved").wait_for()
                assert "by ada via passkey" in await host.text("#outcome-by")
                assert await host.card().locator("#decision").is_hidden()
                await host.shoot(shots, f"card-approved-{size}")
        assert result["structuredContent"]["approved"] is True
        reads = {"mcp_list_pending_requests", "mcp_get_request_status"}
        for host in hosts.values():  # the card itself only ever read, through the host, and fetched nothing
            assert {call["name"] for call in host.calls} <= reads
            assert (host.errors, host.card_requests) == ([], [])
        await person.close()
        await browser.close()
    publish(shots)


async def test_no_message_from_the_cards_host_decides_only_the_person_at_batons_page_does(
    served: dict[str, Any],
) -> None:
    from playwright.async_api import async_playwright

    async with host_session(served["mcp"]) as session, async_playwright() as playwright:
        tool = {t.name: t for t in (await session.list_tools()).tools}["mcp_request_admin_approval"]
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        host = await Host.open(browser, session, served["host"], "1280")
        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(ask, session, outcome)
            await host.mount(tool, ASK)
            await host.card().locator("#countdown").wait_for()
            request_id = await host.text("#request-id")
            decision_url = f"{served['public']}/inbox/requests/{request_id}"
            (frame,) = host.page.main_frame.child_frames
            sent = await frame.evaluate(EVERY_MESSAGE, {"requestId": request_id, "decisionUrl": decision_url})
            refused = [m for m in sent if m["params"].get("name") == "mcp_respond_to_request"]
            assert len(refused) == 3
            for message in refused:
                result = message["answer"]["result"]
                assert result["structuredContent"]["error_class"] == "hitl_decider_not_authorized", result
            waited = next(m for m in sent if m["params"].get("name") == "mcp_wait_for_request")
            assert waited["answer"]["result"]["structuredContent"]["error_class"] == "hitl_still_pending"
            assert host.links == [decision_url, decision_url + "?action=approve"]  # opened, nothing more
            assert {"ui/message", "ui/update-model-context", "notifications/message"} <= set(host.seen)
            assert stored(served["env"], request_id) == ("pending", [])
            assert "result" not in outcome  # the agent's call still waits
            assert await host.text("#state") == "waiting for a person"

            person, page = await log_in_person(browser, served["env"], served["public"])
            await page.goto(decision_url)
            await page.click("button.approve")
            await page.wait_for_selector("#status.approved")
            result = await settled(outcome)
        assert result["structuredContent"]["decided_by"] == "ada"
        assert result["structuredContent"]["decided_via"] == "passkey"
        assert stored(served["env"], request_id) == ("approved", ["hitl_decided"])
        await person.close()
        await browser.close()


async def test_an_input_card_shows_the_options_and_then_the_answer_a_person_gave_at_baton(
    served: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    question = {
        "question": "Which region should the replay run in?",
        "options": ["eu-west-1", "us-east-1", "ap-southeast-1"],
        "context": {"reason": "The last replay in us-east-1 was throttled."},
        "timeout_seconds": 900,
    }
    shots = tmp_path / "shots"
    shots.mkdir()
    async with host_session(served["mcp"]) as session, async_playwright() as playwright:
        tool = {t.name: t for t in (await session.list_tools()).tools}["mcp_request_admin_input"]
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        person, person_page = await log_in_person(browser, served["env"], served["public"])
        host = await Host.open(browser, session, served["host"], "390")
        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(ask, session, outcome, "mcp_request_admin_input", question)
            await host.mount(tool, question)
            await host.card().locator("#countdown").wait_for()
            assert await host.text("#kind") == "Question"
            assert await host.text("#message") == question["question"]
            assert await host.card().locator("#options li").all_text_contents() == question["options"]
            assert await host.text("#open-decision") == "Answer at baton"
            await host.shoot(shots, "card-question-pending-390")
            await host.card().locator("#open-decision").click()
            with anyio.fail_after(60):  # only stops a hang
                await host.linked.wait()
            await person_page.goto(host.links[0])
            await person_page.check("input[value='eu-west-1']")
            await person_page.click("button.approve")
            await person_page.wait_for_selector("#status.answered")
            result = await settled(outcome)
            await host.page.evaluate("(r) => window.sendToolResult(r)", result)
            await host.card().locator("#outcome-status.answered").wait_for()
        assert await host.text("#answer") == "eu-west-1"
        assert "by ada via passkey" in await host.text("#outcome-by")
        await host.shoot(shots, "card-question-answered-390")
        await person.close()
        await browser.close()
    publish(shots)


async def test_a_call_that_made_no_request_ends_its_card_with_the_reason(served: dict[str, Any]) -> None:
    from playwright.async_api import async_playwright

    bad = {"request_message": "Deploy?", "timeout_seconds": 0}
    async with host_session(served["mcp"]) as session, async_playwright() as playwright:
        tool = {t.name: t for t in (await session.list_tools()).tools}["mcp_request_admin_approval"]
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        host = await Host.open(browser, session, served["host"], "390")
        await host.mount(tool, bad)
        await host.card().locator("#message").filter(has_text="Deploy?").wait_for()
        refused = wire(await session.call_tool("mcp_request_admin_approval", bad))
        assert refused["structuredContent"]["error_class"] == "invalid_arguments"
        await host.page.evaluate("(r) => window.sendToolResult(r)", refused)
        await host.card().locator("#outcome-status.failed").wait_for()
        assert (await host.text("#outcome-by")).startswith("the call made no request: ")
        assert await host.card().locator("#decision").is_hidden()
        await browser.close()
