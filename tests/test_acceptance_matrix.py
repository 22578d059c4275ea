"""The acceptance matrix of issue 15: one approval flow, with the official ``mcp.Client``, for every
era (2025-11-25, 2026-07-28) × transport (stdio, HTTP, stateless HTTP) × decider (elicitation form, URL
elicitation via the inbox, the inbox, the CLI). A form in the client never decides an approval (it is the
agent's own code), so the form cells ask an input request instead, the one kind a form may answer.

Every process shares one store, the agent's ``BATON_HTTP_TOKEN`` and the operator's ``BATON_ADMIN_TOKEN``
(so every process signs links alike); a person logs in to the inbox with the operator's token. The
HTTP servers are started once for the module: ``form_http``/``form_stateless`` elicit by form (no public
URL), ``url_http``/``url_stateless`` have ``BATON_PUBLIC_URL`` pointing at ``form_http``'s inbox. Stdio
servers are started per cell by the client. A cell that cannot apply is skipped with its reason.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from baton.config import load_settings
from baton.hitl.broker import get_broker
from baton.runtime import Runtime
from tests.cli_process import run_cli
from tests.conftest import baton_environ
from tests.hitl.helpers import HttpServer

pytestmark = pytest.mark.anyio

TOKEN = "matrix-agent-token-0123456789abcdef"
ADMIN_TOKEN = "matrix-operator-token-fedcba9876543210"  # the inbox's; the agent's TOKEN never opens it
ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
TRANSPORTS = ("stdio", "http", "stateless")
DECIDERS = {"form": "elicitation", "url": "admin_token", "inbox": "admin_token", "cli": "cli"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The shared store's environment and the four HTTP servers."""
    root = tmp_path_factory.mktemp("matrix")
    env = baton_environ(
        root / "home",
        BATON_HTTP_TOKEN=TOKEN,
        BATON_ADMIN_TOKEN=ADMIN_TOKEN,
        BATON_HITL_ELICITATION="true",
        BATON_HITL_PROGRESS_SECONDS="1",
    )
    servers: dict[str, HttpServer] = {}
    try:
        servers["form_http"] = HttpServer(env, root / "form_http.log")
        public = {"BATON_PUBLIC_URL": servers["form_http"].base_url}
        stateless = {"BATON_HTTP_STATELESS": "true"}
        servers["form_stateless"] = HttpServer({**env, **stateless}, root / "form_stateless.log")
        servers["url_http"] = HttpServer({**env, **public}, root / "url_http.log")
        servers["url_stateless"] = HttpServer({**env, **public, **stateless}, root / "url_stateless.log")
        runtime = Runtime.open(load_settings(env))
        yield {"env": env, "public": public, "servers": servers, "runtime": runtime}
        runtime.close()
    finally:
        for server in servers.values():
            server.stop()


def browser_decides(url: str) -> None:
    """A person opening the elicited inbox page: refused without a login, so they log in and approve there."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    with httpx.Client(timeout=10) as browser:
        anonymous = browser.get(url)
        assert anonymous.status_code == 303 and anonymous.headers["location"].split("?")[0] == "/inbox/login"
        assert browser.post(f"{origin}/inbox/login", data={"token": ADMIN_TOKEN}).status_code == 303
        page = browser.get(url)
        assert page.status_code == 200, page.text
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        posted = browser.post(
            f"{url}/decide", data={"csrf": csrf, "action": "approve"}, follow_redirects=True
        )
        assert posted.status_code == 200, posted.text


def inbox_decides(base_url: str, request_id: str) -> None:
    """The operator logging in to the inbox with the admin token and approving the request."""
    with httpx.Client(base_url=base_url, timeout=10) as browser:
        assert browser.post("/inbox/login", data={"token": ADMIN_TOKEN}).status_code in (200, 303)
        page = browser.get(f"/inbox/requests/{request_id}")
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        done = browser.post(f"/inbox/requests/{request_id}/decide", data={"csrf": csrf, "action": "approve"})
        assert done.status_code in (200, 303), done.text


class Person:
    """The client's elicitation callback: approves a form, or opens a URL and approves there."""

    def __init__(self) -> None:
        self.modes: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.modes.append(params.mode)
        if params.mode == "url":
            await anyio.to_thread.run_sync(browser_decides, params.url)
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"response": "yes"})


@asynccontextmanager
async def connect(
    world: dict[str, Any], era: str, transport: str, decider: str, person: Person | None
) -> AsyncIterator[Client]:
    options: dict[str, Any] = {"mode": ERAS[era], "elicitation_callback": person}
    if transport == "stdio":
        env = {**world["env"], **(world["public"] if decider == "url" else {})}
        params = StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=env)
        async with Client(params, **options) as client:
            yield client
        return
    kind = "url" if decider == "url" else "form"
    server = world["servers"][f"{kind}_{transport}"]
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
        Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http), **options) as client,
    ):
        yield client


async def pending_id(world: dict[str, Any], message: str) -> str:
    broker = get_broker(world["runtime"])
    with anyio.fail_after(300):
        while not (rows := [r for r in broker.list_pending() if r["message"] == message]):
            await anyio.sleep(0.05)
    return str(rows[0]["request_id"])


@pytest.mark.parametrize("decider", list(DECIDERS))
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("era", list(ERAS))
async def test_the_approval_flow(world: dict[str, Any], era: str, transport: str, decider: str) -> None:
    if era == "2025-11-25" and transport == "stateless" and decider in ("form", "url"):
        pytest.skip(
            "not applicable: 2025-11-25 elicitation is a server-to-client request (elicitation/create) whose "
            "answer needs a session; stateless HTTP has none (the 2026-07-28 cells cover stateless elicitation)"
        )
    message = f"Approve {era} {transport} {decider}"
    person = Person() if decider in ("form", "url") else None
    result: dict[str, Any] = {}
    async with connect(world, era, transport, decider, person) as client:
        assert client.protocol_version == era

        async def ask() -> None:
            if decider == "form":
                tool, arguments = "mcp_request_admin_input", {"question": message, "timeout_seconds": 3600}
            else:
                tool, arguments = (
                    "mcp_request_admin_approval",
                    {"request_message": message, "timeout_seconds": 3600},
                )
            answer = await client.call_tool(tool, arguments)
            assert answer.structured_content is not None
            result.update(answer.structured_content)

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            if decider in ("inbox", "cli"):
                request_id = await pending_id(world, message)
                if decider == "cli":
                    done = await anyio.to_thread.run_sync(
                        run_cli, world["env"], "hitl", "approve", request_id
                    )
                    assert done.returncode == 0, done.stderr
                else:
                    base = world["servers"]["form_http"].base_url
                    await anyio.to_thread.run_sync(inbox_decides, base, request_id)
        status = await client.call_tool("mcp_get_request_status", {"request_id": result["request_id"]})
    if decider == "form":
        assert result["success"] is True and result["response"] == "yes" and result["decision"] == "answered"
    else:
        assert result["success"] is True and result["approved"] is True and result["decision"] == "approved"
    assert status.structured_content is not None
    assert status.structured_content["decided_via"] == DECIDERS[decider]
    assert status.structured_content["waiter_gone"] is False
    if person is not None:
        assert person.modes == [decider]
