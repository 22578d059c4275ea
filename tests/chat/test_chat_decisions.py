"""Deciding from chat: a real ``baton serve --http``, the official MCP client, and loopback stand-ins for
the Slack Web API and the Telegram Bot API (baton.testing.chat_apis) that speak their shapes.

The agent asks over MCP; the message with buttons arrives at the fake API; the test presses a button the
way the platform would (a Slack callback signed with the signing secret, a Telegram update with the
webhook's secret token); the waiting call returns the decision, naming the platform and the person.
Every request waits an hour: nothing here depends on how fast a loaded machine runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from baton.testing.chat_apis import (
    FakeSlack,
    FakeTelegram,
    slack_block_actions,
    slack_signed,
    telegram_callback_update,
)
from tests.cli_process import run_cli
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

SLACK_TOKEN = "xoxb-1234-5678-slackbottokensecret"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TELEGRAM_TOKEN = "987654321:AAtelegram-chat-bot-token-secret"
WEBHOOK_SECRET = "telegram-webhook-secret-token-0123"
ALICE_SLACK = "UALICE001"
ALICE_TELEGRAM = 4242001
HOUR = 3600


@pytest.fixture
def slack() -> Any:
    with FakeSlack(token=SLACK_TOKEN) as fake:
        yield fake


@pytest.fixture
def telegram() -> Any:
    with FakeTelegram(token=TELEGRAM_TOKEN) as fake:
        yield fake


@pytest.fixture
def chat_env(baton_env: dict[str, str], slack: FakeSlack, telegram: FakeTelegram) -> dict[str, str]:
    """Both chat apps configured against the fakes, and alice linked to a Slack and a Telegram account."""
    env = {
        **baton_env,
        "SLACK_BOT_TOKEN": SLACK_TOKEN,
        "SLACK_CHANNEL_ID": "C0APPROVALS",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "BATON_SLACK_API_URL": slack.api_url,
        "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
        "TELEGRAM_DEFAULT_CHAT_ID": "-100555",
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "BATON_TELEGRAM_API_URL": telegram.base_url,
        "BATON_NOTIFY_TIMEOUT_SECONDS": "30",
    }
    for args in (
        ("people", "add", "alice"),
        ("people", "link-chat", "alice", f"slack:{ALICE_SLACK}"),
        ("people", "link-chat", "alice", f"telegram:{ALICE_TELEGRAM}"),
    ):
        done = run_cli(env, *args)
        assert done.returncode == 0, done.stderr
    return env


@asynccontextmanager
async def agent(port: int) -> AsyncIterator[Client]:
    """The official MCP client over streamable HTTP (loopback, no token: the agent ``local``)."""
    async with (
        httpx.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
    ):
        yield client


async def tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


@asynccontextmanager
async def approval_waiting(client: Client, message: str) -> AsyncIterator[dict[str, Any]]:
    """``mcp_request_admin_approval(message)`` waiting in the background (an hour's timeout) while the block
    runs; the block ends once the call returned, and the dict then holds its result."""
    asked: dict[str, Any] = {}

    async def ask() -> None:
        arguments = {"request_message": message, "timeout_seconds": HOUR}
        asked.update(await tool(client, "mcp_request_admin_approval", arguments))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        yield asked


async def posted(fake: Any, method: str, count: int = 1) -> list[Any]:
    """The fake's calls of ``method`` once ``count`` arrived (a hang guard, not a margin)."""
    return await anyio.to_thread.run_sync(lambda: fake.wait_for(method, count))


async def press_slack(
    port: int, payload: dict[str, Any], secret: str = SIGNING_SECRET, at: int | None = None
) -> httpx.Response:
    body, headers = slack_signed(secret, payload, at)
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(f"http://127.0.0.1:{port}/chat/slack/actions", content=body, headers=headers)


async def press_telegram(port: int, update: dict[str, Any], secret: str = WEBHOOK_SECRET) -> httpx.Response:
    headers = {"x-telegram-bot-api-secret-token": secret}
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(f"http://127.0.0.1:{port}/chat/telegram/webhook", json=update, headers=headers)


def receipts(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    done = run_cli(env, "receipts", "list", "--oldest", "--kind", kind, "--json")
    assert done.returncode == 0, done.stderr
    return [row["payload"] for row in json.loads(done.stdout or "[]")]


async def test_a_signed_slack_press_decides_and_the_waiting_call_returns_approved_by_the_person(
    chat_env: dict[str, str], slack: FakeSlack, tmp_path: Path
) -> None:
    port = free_port()
    with http_server(chat_env, f"127.0.0.1:{port}", tmp_path) as _server:
        async with (
            agent(port) as client,
            approval_waiting(client, "Deploy release 42 to prod") as asked,
        ):
            message = (await posted(slack, "chat.postMessage"))[0]
            assert message.headers["authorization"] == f"Bearer {SLACK_TOKEN}"
            assert message.body["channel"] == "C0APPROVALS"
            actions = [b for b in message.body["blocks"] if b["type"] == "actions"]
            assert [e["action_id"] for e in actions[0]["elements"]] == ["baton_approve", "baton_reject"]
            request_id = actions[0]["elements"][0]["value"]
            assert request_id.startswith("hr_")
            press = slack_block_actions(
                {**message.body, "channel": "C0APPROVALS"},
                ALICE_SLACK,
                "baton_approve",
                slack.response_url(),
            )
            answer = await press_slack(port, press)
            assert answer.status_code == 200, answer.text
        assert asked["success"] is True and asked["approved"] is True and asked["decision"] == "approved"
        assert asked["decided_via"] == "slack" and asked["decided_by"] == "alice"
        # the message in the channel: the buttons are gone, who decided is said
        update = (await posted(slack, "response_url"))[0].body
        assert update["replace_original"] is True
        assert not [b for b in update["blocks"] if b["type"] == "actions"]
        assert "Approved by alice in Slack" in json.dumps(update["blocks"])
        # the same press again: nothing changes, and the answer says truthfully what happened
        again = await press_slack(port, press)
        assert again.status_code == 200
        second = (await posted(slack, "response_url", 2))[1].body
        assert "already approved by alice (slack)" in second["text"]
    decided = receipts(chat_env, "hitl_decided")
    assert [(r["request_id"], r["via"], r["decided_by"]) for r in decided] == [(request_id, "slack", "alice")]
    pressed = receipts(chat_env, "chat_action")
    assert [(r["person"], r["user_id"], r["outcome"]) for r in pressed] == [
        ("alice", ALICE_SLACK, "decided"),
        ("alice", ALICE_SLACK, "refused"),
    ]
    everything = (
        run_cli(chat_env, "receipts", "list", "--json").stdout
        + (tmp_path / f"serve-127.0.0.1_{port}.log").read_text()
    )
    for secret in (SLACK_TOKEN, SIGNING_SECRET, TELEGRAM_TOKEN, WEBHOOK_SECRET):
        assert secret not in everything


async def test_slack_team_id_keeps_presses_from_other_workspaces_out(
    chat_env: dict[str, str], slack: FakeSlack, tmp_path: Path
) -> None:
    """One app in several workspaces signs every press with one secret: SLACK_TEAM_ID says whose count.
    A press by alice's id from another workspace, or by a guest of another workspace in ours, is refused
    with nothing decided; hers from our workspace decides."""
    env = {**chat_env, "SLACK_TEAM_ID": "T0OURS, E0ORG"}
    port = free_port()
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        async with agent(port) as client, approval_waiting(client, "Ship the migration") as asked:
            message = (await posted(slack, "chat.postMessage"))[0].body
            request_id = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"]
            foreign = slack_block_actions(
                message, ALICE_SLACK, "baton_approve", slack.response_url("1"), team_id="T0THEIRS"
            )
            guest = slack_block_actions(
                message, ALICE_SLACK, "baton_approve", slack.response_url("2"), team_id="T0OURS"
            )
            guest["user"]["team_id"] = "T0THEIRS"  # a Slack Connect guest pressing in our channel
            for press in (foreign, guest):
                refused = await press_slack(port, press)
                assert refused.status_code == 403, refused.text
                assert refused.json()["error_class"] == "chat_team_not_allowed"
            status = await tool(client, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and status["decided"] is False
            ours = slack_block_actions(
                message, ALICE_SLACK, "baton_approve", slack.response_url("3"), team_id="T0OURS"
            )
            assert (await press_slack(port, ours)).status_code == 200
        assert asked["approved"] is True and asked["decided_by"] == "alice"
    assert [r["request_id"] for r in receipts(env, "hitl_decided")] == [request_id]
    assert [r["outcome"] for r in receipts(env, "chat_action")] == ["decided"]


def test_an_organization_id_admits_its_workspaces_and_nothing_else() -> None:
    from baton.chat.slack import team_allowed

    teams = frozenset({"T0OURS", "E0ORG"})
    member = {"user": {"team_id": "T0SISTER"}, "team": {"id": "T0SISTER"}, "enterprise": {"id": "E0ORG"}}
    assert team_allowed(teams, member)
    assert not team_allowed(teams, {**member, "enterprise": {"id": "E0OTHER"}})
    assert not team_allowed(teams, {**member, "enterprise": None})
    assert team_allowed(teams, {"team": {"id": "T0OURS"}})  # no user.team_id: the payload's team
    assert not team_allowed(teams, {"user": "UALICE001", "team": "T0OURS"})  # malformed: refused
    assert team_allowed(frozenset(), {"team": {"id": "T0ANY"}})  # unset: any workspace


async def test_slack_refuses_bad_signatures_and_replays_and_links_the_unmapped_quorum_and_step_up(
    chat_env: dict[str, str], slack: FakeSlack, tmp_path: Path
) -> None:
    port = free_port()
    asks = (
        {"request_message": "Rotate the signing key", "timeout_seconds": HOUR},
        {"request_message": "Drop the audit table", "timeout_seconds": HOUR, "required_approvals": 2},
        {"request_message": "Wire EUR 9000", "timeout_seconds": HOUR, "step_up": True},
    )
    with http_server(chat_env, f"127.0.0.1:{port}", tmp_path):
        async with agent(port) as client, anyio.create_task_group() as group:
            for count, arguments in enumerate(asks, start=1):
                group.start_soon(tool, client, "mcp_request_admin_approval", arguments)
                await posted(slack, "chat.postMessage", count)  # one at a time: the order is known
            single, quorum, step_up = (call.body for call in slack.of("chat.postMessage"))
            single_id = next(b for b in single["blocks"] if b["type"] == "actions")["elements"][0]["value"]
            # quorum and step-up requests carry no buttons: their messages say to decide in the inbox
            assert not [b for b in quorum["blocks"] + step_up["blocks"] if b["type"] == "actions"]
            assert "needs 2 different people: decide in the inbox" in json.dumps(quorum["blocks"])
            assert "needs a passkey step-up: decide in the inbox" in json.dumps(step_up["blocks"])
            press = slack_block_actions(single, ALICE_SLACK, "baton_approve", slack.response_url())

            forged = await press_slack(port, press, secret="not-the-signing-secret-at-all-000")
            assert forged.status_code == 401 and forged.json()["error_class"] == "chat_signature_invalid"
            replayed = await press_slack(port, press, at=int(time.time()) - HOUR)
            assert replayed.status_code == 401 and replayed.json()["error_class"] == "chat_request_stale"
            body, headers = slack_signed(SIGNING_SECRET, press)
            tampered = body.replace(b"baton_approve", b"baton_reject")
            async with httpx.AsyncClient(timeout=60) as http:
                changed = await http.post(
                    f"http://127.0.0.1:{port}/chat/slack/actions", content=tampered, headers=headers
                )
            assert changed.status_code == 401 and changed.json()["error_class"] == "chat_signature_invalid"

            stranger = slack_block_actions(single, "UBOB00002", "baton_approve", slack.response_url("1"))
            assert (await press_slack(port, stranger)).status_code == 200
            ephemeral = (await posted(slack, "response_url"))[0].body
            assert ephemeral["response_type"] == "ephemeral" and ephemeral["replace_original"] is False
            assert "not linked" in ephemeral["text"] and f"/inbox/requests/{single_id}" in ephemeral["text"]

            listed = (await tool(client, "mcp_list_pending_requests", {}))["requests"]
            ids = {r["message"]: r["request_id"] for r in listed}
            quorum_id, step_up_id = ids["Drop the audit table"], ids["Wire EUR 9000"]
            reasons = ((quorum_id, "needs 2 different people"), (step_up_id, "needs a passkey step-up"))
            for n, (request_id, reason) in enumerate(reasons, start=2):
                forced = slack_block_actions(single, ALICE_SLACK, "baton_approve", slack.response_url(str(n)))
                forced["actions"][0]["value"] = request_id  # as if the buttons had been there
                assert (await press_slack(port, forced)).status_code == 200
                linked = (await posted(slack, "response_url", n))[n - 1].body
                assert linked["response_type"] == "ephemeral" and reason in linked["text"]
                assert f"/inbox/requests/{request_id}" in linked["text"]

            for request_id in (single_id, quorum_id, step_up_id):
                status = await tool(client, "mcp_get_request_status", {"request_id": request_id})
                assert status["status"] == "pending" and status["decided"] is False
            group.cancel_scope.cancel()
    assert receipts(chat_env, "hitl_decided") == []
    outcomes = [(r["person"], r["request_id"], r["outcome"]) for r in receipts(chat_env, "chat_action")]
    assert outcomes == [
        (None, single_id, "link"),
        ("alice", quorum_id, "link"),
        ("alice", step_up_id, "link"),
    ]


async def test_a_telegram_press_decides_through_the_webhook_and_edits_the_message(
    chat_env: dict[str, str], telegram: FakeTelegram, tmp_path: Path
) -> None:
    port = free_port()
    with http_server(chat_env, f"127.0.0.1:{port}", tmp_path):
        async with (
            agent(port) as client,
            approval_waiting(client, "Refund order 7 (EUR 120)") as asked,
        ):
            sent = (await posted(telegram, "sendMessage"))[0].body
            assert sent["chat_id"] == "-100555"
            approve, reject = sent["reply_markup"]["inline_keyboard"][0]
            assert approve["text"] == "Approve" and reject["text"] == "Reject"
            request_id = approve["callback_data"].rsplit(":", 1)[1]
            message = next(iter(telegram.messages.values()))

            wrong = await press_telegram(
                port, telegram_callback_update(message, ALICE_TELEGRAM, approve["callback_data"]), "nope"
            )
            assert wrong.status_code == 401 and wrong.json()["error_class"] == "chat_signature_invalid"

            stranger = telegram_callback_update(message, 777, approve["callback_data"], update_id=2)
            assert (await press_telegram(port, stranger)).status_code == 200
            alert = (await posted(telegram, "answerCallbackQuery"))[0].body
            assert alert["show_alert"] is True and f"/inbox/requests/{request_id}" in alert["text"]
            status = await tool(client, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending"

            alice = telegram_callback_update(message, ALICE_TELEGRAM, approve["callback_data"], update_id=3)
            assert (await press_telegram(port, alice)).status_code == 200
        assert (
            asked["approved"] is True
            and asked["decided_via"] == "telegram"
            and asked["decided_by"] == "alice"
        )
        answered = (await posted(telegram, "answerCallbackQuery", 2))[1].body
        assert answered["callback_query_id"] == "cbq-3-4242001" and answered["show_alert"] is False
        edited = (await posted(telegram, "editMessageText"))[0].body
        assert (
            edited["message_id"] == message["message_id"]
            and "Approved by alice in Telegram" in edited["text"]
        )
        assert "reply_markup" not in telegram.messages[message["message_id"]]
    decided = receipts(chat_env, "hitl_decided")
    assert [(r["via"], r["decided_by"]) for r in decided] == [("telegram", "alice")]


async def test_without_their_secrets_the_chat_routes_are_off(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with httpx.AsyncClient(timeout=60) as http:
            for path in ("/chat/slack/actions", "/chat/telegram/webhook"):
                answer = await http.post(f"http://127.0.0.1:{port}{path}", content=b"payload=%7B%7D")
                assert answer.status_code == 404 and answer.json()["error_class"] == "chat_not_configured"


def test_chat_identities_are_linked_listed_unlinked_and_go_with_their_person(
    baton_env: dict[str, str],
) -> None:
    assert run_cli(baton_env, "people", "add", "carol").returncode == 0
    assert run_cli(baton_env, "people", "add", "dave").returncode == 0
    bad = run_cli(baton_env, "people", "link-chat", "carol", "slack:carol")
    assert bad.returncode == 1 and "chat_identity_invalid" in bad.stderr
    nobody = run_cli(baton_env, "people", "link-chat", "erin", "slack:UERIN0001")
    assert nobody.returncode == 1 and "person_not_found" in nobody.stderr
    assert run_cli(baton_env, "people", "link-chat", "carol", "slack:UCAROL001").returncode == 0
    assert run_cli(baton_env, "people", "link-chat", "carol", "telegram:31337").returncode == 0
    taken = run_cli(baton_env, "people", "link-chat", "dave", "slack:UCAROL001")
    assert taken.returncode == 1 and "chat_identity_taken" in taken.stderr
    doctor = {c["name"]: c for c in json.loads(run_cli(baton_env, "doctor", "--json").stdout)}
    assert "decide as: carol as slack:UCAROL001, telegram:31337" in doctor["hitl chat"]["detail"]
    listed = {p["name"]: p["chat"] for p in json.loads(run_cli(baton_env, "people", "list", "--json").stdout)}
    assert listed == {"carol": ["slack:UCAROL001", "telegram:31337"], "dave": []}
    assert run_cli(baton_env, "people", "unlink-chat", "telegram:31337").returncode == 0
    missing = run_cli(baton_env, "people", "unlink-chat", "telegram:31337")
    assert missing.returncode == 1 and "chat_identity_not_found" in missing.stderr
    assert run_cli(baton_env, "people", "remove", "carol").returncode == 0
    assert run_cli(baton_env, "people", "add", "carol").returncode == 0
    listed = {p["name"]: p["chat"] for p in json.loads(run_cli(baton_env, "people", "list", "--json").stdout)}
    assert listed["carol"] == []  # a removed person's chat accounts decide nothing, even under a reused name
    kinds = [
        r["kind"] for r in json.loads(run_cli(baton_env, "receipts", "list", "--oldest", "--json").stdout)
    ]
    assert kinds.count("chat_identity_linked") == 2 and kinds.count("chat_identity_unlinked") == 1
