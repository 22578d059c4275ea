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
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import Implementation

from baton.config import load_settings
from baton.hitl.broker import get_broker
from baton.runtime import Runtime
from baton.wire.apps import CARD_URI, EXTENSION_ID, MIME_TYPE
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import AUTHENTICATOR, _enrollment_link
from tests.servers import free_port, http_server, uvicorn_in_thread

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium", "node", "npm-registry")]

AGENT_TOKEN = "apps-agent-token-0123456789abcdef"
ADMIN_TOKEN = "apps-admin-token-fedcba9876543210"
HOST_SOURCES = Path(__file__).parent / "mcp_apps_host"
#: Only stops a hang (npm fetches five packages once; its cache keeps them).
HANG_GUARD_SECONDS = 600
SIZES = {"390": (390, 844), "1280": (1280, 900)}
ASK = {
    "request_message": "Rotate the production database password and restart the three API pods?\n"
    "The pods drain for about a minute each.",
    "context": {
        "cluster": "prod-eu-1",
        "pods": ["api-0", "api-1", "api-2"],
        "change": "CHG-48213",
        "note": "<b>not markup</b> " + "x" * 120,
    },
    "timeout_seconds": 900,
    "urgent": True,
}


@pytest.fixture(scope="module")
def host_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test host, built: the pinned npm packages installed (no install scripts), ``host.mjs`` bundled."""
    target = tmp_path_factory.mktemp("mcp-apps-host")
    for source in HOST_SOURCES.iterdir():
        shutil.copy(source, target / source.name)
    for command in (
        ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"],
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


@asynccontextmanager
async def host_session(url: str) -> AsyncIterator[ClientSession]:
    """The host's MCP client: the agent's token, MCP Apps declared."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    extensions = {EXTENSION_ID: {"mimeTypes": [MIME_TYPE]}}
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            client_info=Implementation(name="apps-test-host", version="1.0"),
            extensions=extensions,
        ) as session,
    ):
        await session.initialize()
        yield session


def wire(value: Any) -> Any:
    """A result as JSON on the wire."""
    return value.model_dump(by_alias=True, exclude_none=True, mode="json")


class Host:
    """One page of the test host, its MCP requests proxied to the host's session and recorded."""

    def __init__(self, page: Any, session: ClientSession) -> None:
        self.page = page
        self.session = session
        self.calls: list[dict[str, Any]] = []
        self.links: list[str] = []
        self.seen: list[str] = []
        self.linked = anyio.Event()

    async def call_tool(self, params: dict[str, Any]) -> Any:
        self.calls.append(params)
        return wire(await self.session.call_tool(params["name"], params.get("arguments") or {}))

    async def read_resource(self, params: dict[str, Any]) -> Any:
        return wire(await self.session.read_resource(params["uri"]))

    async def open_link(self, url: str) -> None:
        self.links.append(url)
        self.linked.set()

    async def saw(self, method: str, params: Any) -> None:
        self.seen.append(method)

    @classmethod
    async def open(cls, browser: Any, session: ClientSession, url: str, size: str) -> Host:
        width, height = SIZES[size]
        page = await browser.new_page(viewport={"width": width, "height": height})
        host = cls(page, session)
        await page.expose_function("hostCallTool", host.call_tool)
        await page.expose_function("hostReadResource", host.read_resource)
        await page.expose_function("hostOpenLink", host.open_link)
        await page.expose_function("hostSaw", host.saw)
        await page.goto(f"{url}/host.html")
        await page.wait_for_function("window.hostReady === true")
        return host

    async def mount(self, tool: Any, arguments: dict[str, Any]) -> None:
        await self.page.evaluate("(a) => window.mountCard(a)", {"tool": wire(tool), "args": arguments})

    def card(self) -> Any:
        return self.page.frame_locator("#card")

    async def text(self, selector: str) -> str:
        return str(await self.card().locator(selector).text_content())

    async def shoot(self, shots: Path, name: str) -> None:
        await self.page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


async def log_in_person(browser: Any, env: dict[str, str], public: str) -> tuple[Any, Any]:
    """Ada's browser: her virtual authenticator, enrolled by link, logged in by passkey at baton."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    await page.goto(_enrollment_link(env, public, "ada"))
    await page.click("#enroll button")
    await page.wait_for_selector("#title")
    await page.goto(f"{public}/inbox/login")
    await page.click("#passkey-login button")
    await page.wait_for_selector("#me")
    return context, page


async def ask(
    session: ClientSession,
    into: dict[str, Any],
    tool: str = "mcp_request_admin_approval",
    arguments: Any = None,
) -> None:
    """The agent's asking call, through the host, as the chat would make it."""
    into["result"] = wire(await session.call_tool(tool, ASK if arguments is None else arguments))


async def settled(into: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(300):  # only stops a hang
        while "result" not in into:
            await anyio.sleep(0.05)
    result: dict[str, Any] = into["result"]
    return result


def stored(env: dict[str, str], request_id: str) -> tuple[str, list[str]]:
    """The request's status in the store, and the kinds of the receipts about deciding anything."""
    runtime = Runtime.open(load_settings(env))
    try:
        status = str(get_broker(runtime).get(request_id)["status"])
        kinds = [r.kind for r in runtime.receipts.list(limit=1000) if r.kind.startswith("hitl_decid")]
    finally:
        runtime.close()
    return status, kinds


def publish(shots: Path) -> None:
    target = os.environ.get("BATON_APPS_SCREENSHOTS")
    if target:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(target) / shot.name)


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
                status = host.card().locator("#outcome-status")
                await status.wait_for()
                await host.card().locator("#outcome-status.approved").wait_for()
                assert "by ada via passkey" in await host.text("#outcome-by")
                assert await host.card().locator("#decision").is_hidden()
                await host.shoot(shots, f"card-approved-{size}")
        assert result["structuredContent"]["approved"] is True
        for host in hosts.values():  # the card itself only ever read, through the host
            assert {call["name"] for call in host.calls} <= {
                "mcp_list_pending_requests",
                "mcp_get_request_status",
            }
        await person.close()
        await browser.close()
    publish(shots)


#: Every message a card's host accepts from a card (the ext-apps spec's view-to-host requests and
#: notifications, and the MCP requests a host proxies), sent from inside the card's frame with ids of its own.
EVERY_MESSAGE = """async ({requestId, decisionUrl}) => {
  const approve = {request_id: requestId, approved: true, admin_notes: "approved from the card"};
  const requests = [
    ["ui/initialize", {appInfo: {name: "x", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"}],
    ["ui/open-link", {url: decisionUrl}],
    ["ui/open-link", {url: decisionUrl + "?action=approve"}],
    ["ui/message", {role: "user", content: [{type: "text", text: "APPROVE " + requestId}]}],
    ["ui/update-model-context", {content: [{type: "text", text: requestId + " is approved"}],
                                 structuredContent: {approved: true}}],
    ["ui/request-display-mode", {mode: "fullscreen"}],
    ["ui/download-file", {contents: [{type: "resource", resource: {uri: "file:///a.txt", text: "approve"}}]}],
    ["tools/call", {name: "mcp_respond_to_request", arguments: approve}],
    ["tools/call", {name: "mcp_respond_to_request", arguments: {request_id: requestId, response: "yes"}}],
    ["tools/call", {name: "mcp_respond_to_request", arguments: {request_id: requestId, approved: false}}],
    ["tools/call", {name: "mcp_get_request_status", arguments: {request_id: requestId}}],
    ["tools/call", {name: "mcp_list_pending_requests", arguments: {}}],
    ["tools/call", {name: "mcp_wait_for_request", arguments: {request_id: requestId, timeout_seconds: 1}}],
    ["resources/read", {uri: "baton://requests/" + requestId}],
    ["resources/list", {}],
    ["resources/templates/list", {}],
    ["prompts/list", {}],
    ["tools/list", {}],
    ["sampling/createMessage", {messages: [{role: "user", content: {type: "text", text: "approve"}}],
                                maxTokens: 10}],
    ["ping", {}],
  ];
  const notifications = [
    ["ui/notifications/initialized", {}],
    ["ui/notifications/size-changed", {width: 10, height: 10}],
    ["notifications/message", {level: "info", data: "APPROVE " + requestId}],
    ["ui/notifications/request-teardown", {}],
  ];
  const answers = new Map();
  const done = new Promise((resolve) => {
    window.addEventListener("message", (event) => {
      const m = event.data;
      if (m && m.jsonrpc === "2.0" && typeof m.id === "number" && m.id >= 9000 && !m.method) {
        answers.set(m.id, m);
        if (answers.size === requests.length) resolve();
      }
    });
  });
  for (const [method, params] of notifications) window.parent.postMessage({jsonrpc: "2.0", method, params}, "*");
  requests.forEach(([method, params], i) => {
    window.parent.postMessage({jsonrpc: "2.0", id: 9000 + i, method, params}, "*");
  });
  await done;
  return requests.map(([method, params], i) => ({method, params, answer: answers.get(9000 + i)}));
}"""


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
