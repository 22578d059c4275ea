"""``baton chat telegram-webhook``: the bot's webhook registered from the settings, never printing a secret."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from baton.testing.chat_apis import FakeTelegram
from tests.cli_process import run_cli

BOT_TOKEN = "424242:AAbot-token-for-the-webhook-test"
WEBHOOK_SECRET = "webhook-secret_0123456789abcdef"
PUBLIC_URL = "https://baton.example.com"


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=BOT_TOKEN) as fake:
        yield fake


@pytest.fixture
def env(baton_env: dict[str, str], telegram: FakeTelegram) -> dict[str, str]:
    return {
        **baton_env,
        "BATON_TELEGRAM_API_URL": telegram.base_url,
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "BATON_PUBLIC_URL": PUBLIC_URL,
    }


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert BOT_TOKEN not in text and WEBHOOK_SECRET not in text and "Traceback" not in text


def test_the_webhook_is_registered_with_the_secret_and_only_button_presses(
    env: dict[str, str], telegram: FakeTelegram
) -> None:
    shown = run_cli(env, "chat", "telegram-webhook", "--show")
    assert shown.returncode == 1, shown.stderr  # nothing registered yet: not what baton expects
    assert "(no webhook)" in shown.stdout and f"{PUBLIC_URL}/chat/telegram/webhook" in shown.stdout
    assert telegram.of("setWebhook") == []

    registered = run_cli(env, "chat", "telegram-webhook")
    assert registered.returncode == 0, registered.stderr
    (call,) = telegram.of("setWebhook")
    assert call.body == {
        "url": f"{PUBLIC_URL}/chat/telegram/webhook",
        "secret_token": WEBHOOK_SECRET,
        "allowed_updates": ["callback_query"],
    }
    assert registered.stdout.startswith(f"Registered: {PUBLIC_URL}/chat/telegram/webhook\n")
    assert "callback_query" in registered.stdout
    assert_no_secret(registered.stdout, registered.stderr, shown.stdout, shown.stderr)

    state = run_cli(env, "chat", "telegram-webhook", "--show", "--json")
    assert state.returncode == 0, state.stderr
    assert json.loads(state.stdout) == {
        "url": f"{PUBLIC_URL}/chat/telegram/webhook",
        "expected_url": f"{PUBLIC_URL}/chat/telegram/webhook",
        "matches": True,
        "pending_update_count": 0,
        "allowed_updates": ["callback_query"],
        "last_error_message": None,
        "last_error_date": None,
    }
    assert len(telegram.of("setWebhook")) == 1


@pytest.mark.parametrize(
    ("changes", "args", "error_class"),
    [
        ({"TELEGRAM_WEBHOOK_SECRET": ""}, [], "chat_webhook_not_configured"),
        ({"TELEGRAM_WEBHOOK_SECRET": "has spaces and ümlauts"}, [], "chat_webhook_not_configured"),
        ({"TELEGRAM_BOT_TOKEN": ""}, [], "chat_webhook_not_configured"),
        ({"BATON_PUBLIC_URL": ""}, [], "chat_webhook_url_invalid"),
        ({"BATON_PUBLIC_URL": "http://baton.example.com"}, [], "chat_webhook_url_invalid"),
        (
            {},
            ["--url", "https://user:pw@baton.example.com/chat/telegram/webhook"],
            "chat_webhook_url_invalid",
        ),
        ({}, ["--url", "https://baton.example.com/somewhere/else"], "chat_webhook_url_invalid"),
        ({"TELEGRAM_BOT_TOKEN": "999:not-the-bots-token"}, [], "chat_api_failed"),
    ],
)
def test_a_refused_set_up_sends_nothing_it_should_not_and_says_why(
    env: dict[str, str], telegram: FakeTelegram, changes: dict[str, str], args: list[str], error_class: str
) -> None:
    result = run_cli({**env, **changes}, "chat", "telegram-webhook", *args)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{error_class}:"), result.stderr
    assert_no_secret(result.stdout, result.stderr)
    assert "999:not-the-bots-token" not in result.stderr
    assert telegram.of("setWebhook") == [] and telegram.webhook["url"] == ""
