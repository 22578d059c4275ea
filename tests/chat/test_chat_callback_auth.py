"""Chat callbacks that must decide nothing, against a real ``baton serve --http`` on 127.0.0.1: a Telegram
update without the webhook's secret token, a Slack press signed for a time far ahead of this server's clock.

Each press comes from a linked person on a request with buttons, so that only the missing proof stands
between it and a decision; after the refusals the genuine press decides, which shows the refused ones
were not refused for some other reason. Each test kills a hand-made mutant of ``chat/telegram.py`` or
``chat/slack.py`` (docs/testing.md, "Promises and the tests that hold them").
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from baton.testing.chat_apis import FakeSlack, FakeTelegram, slack_block_actions, telegram_callback_update
from tests.chat.test_chat_decisions import (  # noqa: F401 -- the fixtures: fakes and a configured store
    ALICE_SLACK,
    ALICE_TELEGRAM,
    HOUR,
    agent,
    approval_waiting,
    chat_env,
    posted,
    press_slack,
    press_telegram,
    receipts,
    slack,
    telegram,
    tool,
)
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio


async def test_a_telegram_update_without_the_secret_token_header_decides_nothing(
    chat_env: dict[str, str],  # noqa: F811
    telegram: FakeTelegram,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/chat/telegram/webhook"
    with http_server(chat_env, f"127.0.0.1:{port}", tmp_path):
        async with agent(port) as client, approval_waiting(client, "Refund order 8") as asked:
            sent = (await posted(telegram, "sendMessage"))[0].body
            approve = sent["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
            request_id = approve.rsplit(":", 1)[1]
            message = next(iter(telegram.messages.values()))
            update = telegram_callback_update(message, ALICE_TELEGRAM, approve)
            async with httpx.AsyncClient(timeout=60) as http:
                for headers in ({}, {"x-telegram-bot-api-secret-token": ""}):
                    refused = await http.post(url, json=update, headers=headers)
                    assert refused.status_code == 401, headers
                    assert refused.json()["error_class"] == "chat_signature_invalid"
            status = await tool(client, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and telegram.of("answerCallbackQuery") == []
            genuine = telegram_callback_update(message, ALICE_TELEGRAM, approve, update_id=2)
            assert (await press_telegram(port, genuine)).status_code == 200
        assert (asked["approved"], asked["decided_via"]) == (True, "telegram")
    assert [r["outcome"] for r in receipts(chat_env, "chat_action")] == ["decided"]


async def test_a_slack_press_signed_for_the_future_is_stale_and_decides_nothing(
    chat_env: dict[str, str],  # noqa: F811
    slack: FakeSlack,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A capture signed ahead of time (a skewed or hostile signer) would replay for as long as it is ahead:
    the five-minute window holds both ways."""
    port = free_port()
    with http_server(chat_env, f"127.0.0.1:{port}", tmp_path):
        async with agent(port) as client, approval_waiting(client, "Rotate the deploy key") as asked:
            message = (await posted(slack, "chat.postMessage"))[0].body
            press = slack_block_actions(message, ALICE_SLACK, "baton_approve", slack.response_url())
            request_id = press["actions"][0]["value"]
            for ahead in (HOUR, 24 * HOUR):
                early = await press_slack(port, press, at=int(time.time()) + ahead)
                assert early.status_code == 401 and early.json()["error_class"] == "chat_request_stale"
            status = await tool(client, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and slack.of("response_url") == []
            assert (await press_slack(port, press)).status_code == 200
        assert (asked["approved"], asked["decided_via"]) == (True, "slack")
    assert [r["outcome"] for r in receipts(chat_env, "chat_action")] == ["decided"]
