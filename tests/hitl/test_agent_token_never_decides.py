"""The agent's HTTP credential never opens the inbox or the console, on any route, with or without an
operator token configured (the documented off-loopback setup has only ``BATON_HTTP_TOKEN``).

A real ``baton serve --http`` on 127.0.0.1; the agent asks over MCP with its token, then presents that same
token to every inbox and console route as a bearer header, as a login and as a form field. The request stays
pending and nothing is decided.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from baton.chat import web as chat_web
from baton.config import load_settings
from baton.console import web
from baton.hitl import enroll, inbox
from baton.hitl.broker import get_broker
from baton.runtime import Runtime
from tests.hitl.helpers import pending_requests
from tests.hitl.test_decision_authority import http_client, structured
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

AGENT_TOKEN = "agent-token-for-inbox-tests-0123456789"
ADMIN_TOKEN = "operator-token-for-inbox-tests-98765"


def route_paths(env: dict[str, str], ids: dict[str, str]) -> list[tuple[str, str]]:
    """(method, path) of every inbox, console and chat-callback route, path parameters filled from ``ids``."""
    runtime = Runtime.open(load_settings(env))
    try:
        found = [
            *inbox.routes(runtime),
            *enroll.routes(runtime),
            *web.routes(runtime),
            *chat_web.routes(runtime),
        ]
    finally:
        runtime.close()
    pairs = []
    for route in found:
        path = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], route.path)
        pairs.extend((method, path) for method in sorted(route.methods or ()) if method != "HEAD")
    return pairs


def refused(response: httpx.Response) -> bool:
    """A refusal: the login page (form or "login is off"), a redirect to it, or a 4xx. The inbox's static
    scripts are public files (they hold no request and decide nothing)."""
    path = response.request.url.path
    if response.request.method == "GET" and path.startswith("/inbox/static/") and path.endswith(".js"):
        return response.status_code == 200 and "text/javascript" in response.headers["content-type"]
    if response.request.method == "GET" and path == "/inbox/login":
        return response.status_code == 200
    if response.status_code == 303:
        return response.headers["location"].split("?")[0] == "/inbox/login"
    return 400 <= response.status_code < 500


async def answer(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """The route's answer, following redirects that stay inside the console (``/inbox/console`` opens
    ``/inbox/console/requests``), so a redirect never stands in for the page behind it."""
    response = await http.request(method, path, **kwargs)
    while response.status_code == 303 and response.headers["location"].startswith("/inbox/console"):
        response = await http.get(response.headers["location"], headers=kwargs.get("headers"))
    return response


@pytest.mark.parametrize("operator_token", [None, ADMIN_TOKEN], ids=["agent-token-only", "with-admin-token"])
async def test_the_agents_token_fails_on_every_inbox_and_console_route(
    baton_env: dict[str, str], tmp_path: Path, operator_token: str | None
) -> None:
    # every route is tried with the agent's token: each is a failed authentication, so the per-address
    # lockout (tested in tests/hardening/test_tokens_login.py) is set past the count of routes here
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_LOGIN_MAX_FAILURES": "1000"}
    # the chat callbacks are live (their secrets set, held by Slack and Telegram, not by the agent)
    env |= {
        "SLACK_SIGNING_SECRET": "slack-signing-secret-the-agent-lacks",
        "TELEGRAM_BOT_TOKEN": "4242:telegram-bot-token-for-tests",
        "TELEGRAM_WEBHOOK_SECRET": "telegram-webhook-secret-the-agent-lacks",
    }
    if operator_token:
        env["BATON_ADMIN_TOKEN"] = operator_token
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    asked: dict[str, Any] = {}
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with http_client(port, AGENT_TOKEN) as agent:

            async def ask() -> None:
                asked.update(
                    await structured(
                        agent,
                        "mcp_request_admin_approval",
                        {"request_message": "drop the prod table", "timeout_seconds": 3600},
                    )
                )

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                request_id = (await pending_requests(agent))[0]["request_id"]
                ids = {
                    "request_id": request_id,
                    "subagent_id": "sa_none",
                    "timer_id": "tm_none",
                    "grant_id": "gr_none",
                }
                routes = route_paths(env, ids)
                assert ("POST", f"/inbox/requests/{request_id}/decide") in routes
                assert ("POST", f"/inbox/console/requests/{request_id}/decide") in routes
                bearer = {"Authorization": f"Bearer {AGENT_TOKEN}", "Origin": base}
                form = {"action": "approve", "admin_notes": "self-approved", "token": AGENT_TOKEN}
                async with httpx.AsyncClient(base_url=base, follow_redirects=False, timeout=60) as http:
                    login = await http.post("/inbox/login", data={"token": AGENT_TOKEN}, headers=bearer)
                    assert login.status_code == 401 and "baton_inbox" not in login.cookies
                    for method, path in routes:
                        got = await answer(http, method, path, headers=bearer, data=form)
                        assert refused(got), (method, path, got.status_code, got.text[:300])
                        assert "drop the prod table" not in got.text, (method, path)
                still = await structured(agent, "mcp_get_request_status", {"request_id": request_id})
                assert still["status"] == "pending", still
                group.cancel_scope.cancel()
    assert asked == {}  # the waiting call was cut by the test, never answered
    runtime = Runtime.open(load_settings(env))
    try:
        view = get_broker(runtime).get(request_id)
    finally:
        runtime.close()
    assert view["status"] == "pending" and view["approved"] is False and view["decided_via"] is None
