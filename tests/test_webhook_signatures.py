"""baton's own posts to HITL_WEBHOOK_URL are signed per Standard Webhooks; an agent's payloads are not, so a
receiver verifying signatures cannot be fooled by ``mcp_send_webhook`` look-alikes (a real ``baton serve``
over stdio, the loopback webhook receiver, the decision through the real CLI)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from pathlib import Path

import anyio
import pytest

from baton.testing.webhooks import ReceivedRequest, WebhookReceiver
from tests.cli_process import run_cli
from tests.conftest import call
from tests.test_notify_stdio import session_logging_to

pytestmark = pytest.mark.anyio

KEY = secrets.token_bytes(32)
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def verified(request: ReceivedRequest) -> bool:
    """What a receiver does: HMAC-SHA256 of ``id.timestamp.body`` with the key, compared in constant time."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    if "webhook-signature" not in headers:
        return False
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + request.raw
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest()).decode()
    offered = [
        part.split(",", 1)[1] for part in headers["webhook-signature"].split() if part.startswith("v1,")
    ]
    return any(hmac.compare_digest(expected, signature) for signature in offered)


async def test_batons_announcement_is_signed_and_an_agents_look_alike_is_not(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    with WebhookReceiver() as web:
        env = {**baton_env, "HITL_WEBHOOK_URL": web.url("/hook"), "HITL_WEBHOOK_SECRET": SECRET}
        async with session_logging_to(env, tmp_path / "server.log") as session:
            fake = {"event": "hitl_request", "request": {"request_id": "req_fake"}, "link": "http://x"}
            sent = await call(session, "mcp_send_webhook", {"payload": fake})
            assert sent["success"] is True, sent
            async with anyio.create_task_group() as group:
                ask = {"request_message": "Ship it", "timeout_seconds": 3600}
                group.start_soon(call, session, "mcp_request_admin_approval", ask)
                posts = await anyio.to_thread.run_sync(web.wait_for, 2)
                request_id = json.loads(posts[1].raw)["request"]["request_id"]
                decided = await anyio.to_thread.run_sync(run_cli, env, "hitl", "reject", request_id)
                assert decided.returncode == 0, decided.stderr
        receipts = run_cli(env, "receipts", "list", "--limit", "1000", "--json").stdout
    agents, batons = posts[0], posts[1]
    assert json.loads(agents.raw) == fake and not verified(agents)
    assert json.loads(batons.raw)["event"] == "hitl_request" and verified(batons)
    for where, text in (("log", (tmp_path / "server.log").read_text()), ("receipts", receipts)):
        assert SECRET not in text and SECRET[6:] not in text, where
