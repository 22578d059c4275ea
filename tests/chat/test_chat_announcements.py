"""Announcements through the Slack app and the Telegram Bot API (loopback fakes): buttons only where a press
may decide, plain text through the app when no webhook is set, and a refused token fails closed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.notify.service import HitlAnnouncer, Notifier
from baton.runtime import Runtime
from baton.testing.chat_apis import FakeSlack, FakeTelegram
from tests.notify_support import DELIVERY, assert_no_secret, open_runtime

pytestmark = pytest.mark.anyio

SLACK_TOKEN = "xoxb-9999-8888-announcement-token"
TELEGRAM_TOKEN = "55555:AAannouncement-telegram-token"
SECRETS = {
    "SLACK_SIGNING_SECRET": "slack-signing-secret-for-announcements",
    "TELEGRAM_WEBHOOK_SECRET": "telegram-webhook-secret-for-announcements",
}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(token=SLACK_TOKEN) as fake:
        yield fake


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TELEGRAM_TOKEN) as fake:
        yield fake


def chat_runtime(tmp_path: Path, slack: FakeSlack, telegram: FakeTelegram, **tokens: str) -> Runtime:
    env = {
        "BATON_HOME": str(tmp_path / "home"),
        "SLACK_BOT_TOKEN": tokens.get("slack_token", SLACK_TOKEN),
        "SLACK_CHANNEL_ID": "C0APPROVALS",
        "BATON_SLACK_API_URL": slack.api_url,
        "TELEGRAM_BOT_TOKEN": tokens.get("telegram_token", TELEGRAM_TOKEN),
        "TELEGRAM_DEFAULT_CHAT_ID": "-100777",
        "BATON_TELEGRAM_API_URL": telegram.base_url,
        "BATON_PUBLIC_URL": "https://baton.example.com",
        **SECRETS,
        **DELIVERY,
    }
    return open_runtime(env)


def request(kind: str, **rules: Any) -> dict[str, Any]:
    return {
        "request_id": f"hr_{kind[:1]}{'0' * 19}",
        "kind": kind,
        "message": "Ship build 7 to every region, then tell <!channel> and <https://evil.example|the docs> it is done"
        if kind == "approval"
        else "Which region?",
        "context": None,
        "options": None,
        "urgent": False,
        "created_at": "2026-12-03T10:00:00+00:00",
        "expires_at": "2026-12-03T11:00:00+00:00",
        "agent": "release-bot",
        "required_approvals": 1,
        "step_up": False,
        **rules,
    }


async def test_buttons_go_only_on_what_a_press_may_decide_and_agent_text_cannot_mention_the_channel(
    tmp_path: Path, slack: FakeSlack, telegram: FakeTelegram
) -> None:
    runtime = chat_runtime(tmp_path, slack, telegram)
    try:
        announcer = HitlAnnouncer(Notifier(runtime))
        approval = await announcer.announce(request("approval"), None)
        question = await announcer.announce(request("input"), None)
    finally:
        runtime.close()
    assert [(r["channel"], r["success"], r["buttons"]) for r in approval] == [
        ("telegram", True, True),
        ("slack", True, True),
    ]
    assert [(r["channel"], r["buttons"]) for r in question] == [("telegram", False), ("slack", False)]
    posted = [call.body for call in slack.wait_for("chat.postMessage", 2)]
    assert [[b["type"] for b in p["blocks"]] for p in posted] == [
        ["header", "section", "actions"],
        ["header", "section"],
    ]
    section = posted[0]["blocks"][1]["text"]["text"]
    # the agent's text is escaped: no @channel mention, no disguised link
    assert "&lt;!channel&gt;" in section and "<!channel>" not in section and "<https://evil" not in section
    assert (
        "An answer is typed: decide in the inbox (https://baton.example.com/inbox/requests/hr_i"
        in (posted[1]["blocks"][1]["text"]["text"])
    )
    sent = [call.body for call in telegram.wait_for("sendMessage", 2)]
    assert (
        sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == "baton:approve:hr_a" + "0" * 19
    )
    assert "reply_markup" not in sent[1] and "An answer is typed" in sent[1]["text"]


async def test_a_refused_bot_token_is_a_failed_delivery_receipted_without_the_token(
    tmp_path: Path, slack: FakeSlack, telegram: FakeTelegram
) -> None:
    wrong_slack, wrong_telegram = "xoxb-0000-wrong-slack-bot-token", "11111:AAwrong-telegram-bot-token"
    runtime = chat_runtime(tmp_path, slack, telegram, slack_token=wrong_slack, telegram_token=wrong_telegram)
    try:
        results = await HitlAnnouncer(Notifier(runtime)).announce(request("approval"), None)
        receipts = [r.payload for r in runtime.receipts.list(kind="notification")]
    finally:
        runtime.close()
    failed = {r["channel"]: r for r in results}
    assert (
        failed["slack"]["error_class"] == failed["telegram"]["error_class"] == "notification_delivery_failed"
    )
    assert (
        failed["slack"]["attempts"] == failed["telegram"]["attempts"] == 1
    )  # a refused token is not retried
    assert "invalid_auth" in failed["slack"]["reason"] and "HTTP 401" in failed["telegram"]["reason"]
    assert sorted((r["provider"], r["outcome"]) for r in receipts) == [
        ("slack_app", "failed"),
        ("telegram_bot_api", "failed"),
    ]
    secrets = [wrong_slack, wrong_telegram, *SECRETS.values(), "-100777"]
    assert_no_secret("results", results, secrets)
    assert_no_secret("receipts", receipts, secrets)
    assert slack.of("chat.postMessage") == [] and telegram.of("sendMessage") == []


async def test_without_a_webhook_the_slack_tool_posts_plain_text_through_the_app(
    tmp_path: Path, slack: FakeSlack, telegram: FakeTelegram
) -> None:
    runtime = chat_runtime(tmp_path, slack, telegram)
    try:
        sent = await Notifier(runtime).send_slack("build 7 is green")
        ready = {r.channel: r for r in Notifier(runtime).channels()}
    finally:
        runtime.close()
    assert sent["provider"] == "slack_app" and sent["delivered"] is True
    (call,) = slack.wait_for("chat.postMessage")
    assert call.body["text"] == "build 7 is green" and "actions" not in json.dumps(call.body["blocks"])
    assert ready["slack"].ready and ready["slack"].provider == "slack_app"
    assert "Approve/Reject" in ready["slack"].detail and "Approve/Reject" in ready["telegram"].detail
