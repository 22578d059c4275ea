"""Channel definitions: the real apprise plugins each configuration selects (no network is touched)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.errors import BatonError
from baton.evidence import redaction
from baton.notify import channels, mail
from baton.notify.delivery import with_timeouts
from baton.notify.readiness import readiness
from baton.notify.service import Notifier
from tests.notify_support import open_runtime

pytestmark = pytest.mark.anyio


def plugin(target: channels.Target) -> Any:
    """The apprise plugin instance a send would use, with three-second timeouts."""
    import apprise

    instance = apprise.Apprise.instantiate(with_timeouts(target.service, 3), suppress_exceptions=False)
    assert instance is not None
    assert instance.request_timeout == (3.0, 3.0)
    return instance


def test_official_slack_and_discord_webhooks_use_apprises_native_plugins() -> None:
    settings = load_settings(
        {
            "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T1AAAAAAA/B1BBBBBBB/abcdefghijklmnopqrstuvwx",
            "DISCORD_WEBHOOK_URL": "https://discord.com/api/webhooks/123456789/abcDEF_ghi-JKL",
        }
    )
    slack = channels.slack_target(settings, "hi")
    discord = channels.discord_target(settings, "hi")
    assert type(plugin(slack)).__name__ == "NotifySlack" and slack.recipient == "hooks.slack.com"
    assert type(plugin(discord)).__name__ == "NotifyDiscord" and discord.recipient == "discord.com"


def test_telegram_and_sendgrid_without_overrides_use_the_official_plugins() -> None:
    settings = load_settings(
        {
            "TELEGRAM_BOT_TOKEN": "123456789:AAbbccddeeffgghh",
            "TELEGRAM_DEFAULT_CHAT_ID": "-100123456789",
            "SENDGRID_API_KEY": "SG.abcdefghijklmnop",
            "SMTP_FROM_EMAIL": "baton@example.org",
        }
    )
    telegram = plugin(channels.telegram_target(settings, "<b>x</b>", None, "HTML"))
    assert type(telegram).__name__ == "NotifyTelegram"
    assert "format=html" in telegram.url() and telegram.targets == [(-100123456789, None)]
    email = mail.email_target(settings, "ada@example.com", "s", "b")
    assert email.provider == "sendgrid" and type(plugin(email)).__name__ == "NotifySendGrid"


@pytest.mark.parametrize(
    ("port", "security", "mode", "expected_port"),
    [
        ("465", "", "ssl", 465),
        ("587", "", "starttls", 587),
        ("", "", "starttls", 587),
        ("2465", "ssl", "ssl", 2465),
        ("", "none", "insecure", 25),
    ],
)
def test_smtp_security_follows_the_port_unless_set_explicitly(
    port: str, security: str, mode: str, expected_port: int
) -> None:
    settings = load_settings(
        {
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": port,
            "BATON_SMTP_SECURITY": security,
            "SMTP_FROM_EMAIL": "baton@example.org",
        }
    )
    email = plugin(mail.email_target(settings, "ada@example.com", "s", "b"))
    assert (email.secure_mode, email.port, email.smtp_host) == (mode, expected_port, "127.0.0.1")


def test_smtp_refuses_a_clear_text_password_to_a_remote_host() -> None:
    settings = load_settings(
        {
            "SMTP_HOST": "mail.example.org",
            "SMTP_USERNAME": "u@example.org",
            "SMTP_PASSWORD": "pw-1234567890",
            "BATON_SMTP_SECURITY": "none",
        }
    )
    with pytest.raises(BatonError) as caught:
        mail.email_target(settings, "ada@example.com", "s", "b")
    assert caught.value.error_class == "config_invalid"
    assert "pw-1234567890" not in caught.value.message
    assert mail.email_readiness(settings).ready is False


def test_partial_smtp_credentials_are_reported_missing() -> None:
    settings = load_settings({"SMTP_HOST": "mail.example.org", "SMTP_USERNAME": "u@example.org"})
    ready = mail.email_readiness(settings)
    assert (ready.ready, ready.provider, ready.missing) == (False, "smtp", ("SMTP_PASSWORD",))


def test_recipient_hints_keep_only_what_identifies_nothing_secret() -> None:
    assert redaction.email_hint("ada@example.com") == "a***@example.com"
    assert redaction.chat_hint("-100987654389") == "chat …89"
    assert redaction.chat_hint("0") == "chat …"
    assert redaction.url_hint("https://hooks.slack.com/services/T/B/secret?x=1") == "hooks.slack.com"


def test_unknown_parse_modes_are_invalid_arguments() -> None:
    settings = load_settings({"TELEGRAM_BOT_TOKEN": "123456789:AAbbccddeeffgghh"})
    with pytest.raises(BatonError) as caught:
        channels.telegram_target(settings, "x", "0", "bbcode")
    assert caught.value.error_class == "invalid_arguments"


async def test_a_token_apprise_rejects_fails_without_echoing_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = "not-a-valid-bot-token-value"
    runtime = open_runtime({"BATON_HOME": str(tmp_path), "TELEGRAM_BOT_TOKEN": token})
    with pytest.raises(BatonError) as caught:
        await Notifier(runtime).send_telegram("hello", "0")
    assert caught.value.error_class == "notification_delivery_failed"
    assert caught.value.details["attempts"] == 1
    assert "refused the telegram configuration" in caught.value.details["reason"]
    assert token not in str(caught.value.to_result())
    assert "Telegram Bot Token" in caplog.text and token not in caplog.text


def test_readiness_flags_unusable_urls_and_an_email_channel_without_an_admin() -> None:
    settings = load_settings(
        {
            "HITL_WEBHOOK_URL": "ftp://127.0.0.1/x",
            "SMTP_HOST": "127.0.0.1",
            "SMTP_FROM_EMAIL": "b@example.org",
        }
    )
    rows = {r.channel: r for r in readiness(settings)}
    assert rows["webhook"].ready is False and rows["webhook"].detail.startswith("config_invalid")
    assert rows["email"].ready is True and "HITL_ADMIN_EMAIL unset" in rows["email"].detail


def test_every_notification_error_class_is_documented() -> None:
    from baton.errors import ERROR_CLASSES

    doc = (Path(__file__).resolve().parents[1] / "docs" / "error-classes.md").read_text()
    for name in (n for n in ERROR_CLASSES if n.startswith("notification_")):
        assert f"| `{name}` |" in doc, name
