"""URL-mode elicitation: the client is asked to open the request's inbox page, which requires a login.

It is never a pre-authenticated link: opening it without a login leads to the login page, and the client's
``accept`` decides nothing. The person logs in and decides in the browser (here: httpx playing the browser
against a real ``baton serve --http``); the waiting tool call, in either era, completes with that decision.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from baton.hitl.elicit import request_of
from tests.hitl.helpers import HttpServer

pytestmark = pytest.mark.anyio


ADMIN_TOKEN = "admin-token-for-url-elicitation-0123456789"


def decide_in_browser(url: str, action: str) -> str:
    """Open the page (refused without a login), log in as the person, post the decision; returns the page."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    with httpx.Client(timeout=10, headers={"Origin": origin}) as browser:
        anonymous = browser.get(url)
        assert anonymous.status_code == 303 and anonymous.headers["location"].split("?")[0] == "/inbox/login"
        login = browser.post(f"{origin}/inbox/login", data={"token": ADMIN_TOKEN})
        assert login.status_code == 303, login.text
        page = browser.get(url)
        assert page.status_code == 200, page.text
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        posted = browser.post(
            f"{url}/decide",
            data={"csrf": csrf, "action": action, "admin_notes": "seen"},
            follow_redirects=True,
        )
        assert posted.status_code == 200, posted.text
        return posted.text


class Browser:
    """An elicitation callback that consents to open the URL and decides there (after answering, like a person)."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.asked: list[Any] = []
        self.decided = anyio.Event()

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        if params.mode != "url":
            return types.ElicitResult(action="decline")

        async def later() -> None:
            await anyio.to_thread.run_sync(decide_in_browser, params.url, self.action)
            self.decided.set()

        self.group.start_soon(later)
        return types.ElicitResult(action="accept")

    group: Any = None


@pytest.mark.parametrize(("mode", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_the_person_decides_in_the_browser_and_the_call_completes(
    baton_env: dict[str, str], tmp_path: Path, mode: str, era: str
) -> None:
    inbox = HttpServer({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "inbox.log")
    try:
        env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_PUBLIC_URL": inbox.base_url}
        browser = Browser("approve")
        params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
        async with anyio.create_task_group() as group:
            browser.group = group
            async with Client(params, elicitation_callback=browser, mode=mode) as client:  # type: ignore[arg-type]
                assert client.protocol_version == era
                result = await client.call_tool(
                    "mcp_request_admin_approval",
                    {"request_message": "Rotate the keys", "timeout_seconds": 3600},
                )
                content = result.structured_content
                assert content is not None
                status = await client.call_tool(
                    "mcp_get_request_status", {"request_id": content["request_id"]}
                )
        assert content["success"] is True and content["approved"] is True and content["admin_notes"] == "seen"
        assert (
            status.structured_content is not None
            and status.structured_content["decided_via"] == "admin_token"
        )
        asked = browser.asked[0]
        assert asked.mode == "url" and asked.url == f"{inbox.base_url}/inbox/requests/{content['request_id']}"
        assert "Rotate the keys" in asked.message
    finally:
        inbox.stop()


async def test_without_a_public_url_the_form_is_used(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HITL_ELICITATION": "true"}
    seen: list[Any] = []

    async def person(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept", content={"response": "no"})

    params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
    async with Client(params, elicitation_callback=person) as client:
        result = await client.call_tool("mcp_request_admin_input", {"question": "x", "timeout_seconds": 3600})
    assert seen[0].mode == "form"
    assert result.structured_content is not None and result.structured_content["response"] == "no"
    # the client's form answer is receipted as elicitation, with the agent (its client's claim) named
    from tests.cli_process import run_cli

    listed = run_cli(baton_env, "receipts", "list", "--oldest", "--kind", "hitl_decided", "--json")
    (decided,) = [row["payload"] for row in json.loads(listed.stdout)]
    assert decided["via"] == "elicitation" and decided["agent"] == "stdio:mcp"


async def test_a_resumed_wait_elicits_under_a_new_id_that_names_the_request(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """2025-11-25: the call is cut after its URL elicitation; ``mcp_wait_for_request`` asks again under a new
    ``elicitationId``, and the decision is announced with ``notifications/elicitation/complete`` for it."""
    inbox = HttpServer({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "inbox.log")
    asked: list[Any] = []
    first_asked = anyio.Event()
    completed: list[str] = []

    async def person(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        if len(asked) == 1:
            first_asked.set()  # this person looks away; the call gets cut
        else:
            await anyio.to_thread.run_sync(decide_in_browser, params.url, "approve")
        return types.ElicitResult(action="accept")

    async def messages(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    try:
        env = {**baton_env, "BATON_HITL_ELICITATION": "true", "BATON_PUBLIC_URL": inbox.base_url}
        params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
        async with Client(
            params, elicitation_callback=person, message_handler=messages, mode="legacy"
        ) as client:
            assert client.protocol_version == "2025-11-25"
            async with anyio.create_task_group() as group:
                arguments = {"request_message": "Rotate the keys", "timeout_seconds": 3600}
                group.start_soon(client.call_tool, "mcp_request_admin_approval", arguments)
                with anyio.fail_after(300):
                    await first_asked.wait()
                group.cancel_scope.cancel()  # the client cuts the call
            pending = await client.call_tool("mcp_list_pending_requests", {})
            assert pending.structured_content is not None
            request_id = pending.structured_content["requests"][0]["request_id"]
            resumed = await client.call_tool("mcp_wait_for_request", {"request_id": request_id})
            with anyio.fail_after(300):
                while not completed:
                    await client.call_tool("mcp_ping", {})
    finally:
        inbox.stop()
    first, second = (params.elicitation_id for params in asked)
    assert first != second
    assert request_of(first) == request_of(second) == request_id
    assert resumed.structured_content is not None and resumed.structured_content["approved"] is True
    assert completed == [second]
