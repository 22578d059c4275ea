"""Shared pieces of the notification tests: fake secrets, a configured environment and a secret scan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import WebhookReceiver

TELEGRAM_TOKEN = "123456789:AAtelegram-bot-token-secret"
SMTP_USERNAME = "mailer-login@example.org"
SMTP_PASSWORD = "smtp-password-secret-42"
SMTP_FROM = "baton-sender@example.org"
SENDGRID_KEY = "SG.sendgrid-secret-key-0123456789"
ADMIN_EMAIL = "admin-person@example.com"
SLACK_PATH = "/services/T0000/B0000/slacksecretpath123"
DISCORD_PATH = "/api/webhooks/4242/discordsecrettoken"
HITL_PATH = "/hooks/hitl-secret-path-77"

#: Bounded delivery for tests: two attempts, a short backoff, and a socket timeout no loaded machine
#: reaches (the loopback peers answer at once; only the test of a peer that never answers sets a short one).
DELIVERY = {
    "BATON_NOTIFY_TIMEOUT_SECONDS": "300",
    "BATON_NOTIFY_ATTEMPTS": "2",
    "BATON_NOTIFY_BACKOFF_SECONDS": "0.05",
}


def configured_env(smtp: SMTPReceiver, web: WebhookReceiver, home: Path) -> dict[str, str]:
    """Every channel configured against the loopback peers (SMTP with login, overrides for Telegram)."""
    return {
        "BATON_HOME": str(home),
        "SMTP_HOST": smtp.host,
        "SMTP_PORT": str(smtp.port),
        "SMTP_USERNAME": SMTP_USERNAME,
        "SMTP_PASSWORD": SMTP_PASSWORD,
        "SMTP_FROM_EMAIL": SMTP_FROM,
        "BATON_SMTP_SECURITY": "none",
        "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
        "TELEGRAM_DEFAULT_CHAT_ID": "-100987654321",
        "BATON_TELEGRAM_API_URL": web.url("/telegram"),
        "SLACK_WEBHOOK_URL": web.url(SLACK_PATH),
        "DISCORD_WEBHOOK_URL": web.url(DISCORD_PATH),
        "HITL_WEBHOOK_URL": web.url(HITL_PATH),
        "HITL_ADMIN_EMAIL": ADMIN_EMAIL,
        # the receivers listen on loopback, which a webhook url chosen in a call may not reach by default
        "BATON_WEBHOOK_ALLOW": "127.0.0.0/8",
        **DELIVERY,
    }


def open_runtime(env: dict[str, str]) -> Runtime:
    """A runtime over ``env`` only (never the developer's own environment)."""
    return Runtime.open(load_settings(env))


def secret_values(env: dict[str, str]) -> list[str]:
    """Every secret a test configured, plus the secret parts of webhook URLs."""
    names = (
        "TELEGRAM_BOT_TOKEN",
        "SMTP_USERNAME",
        "SMTP_PASSWORD",
        "SMTP_FROM_EMAIL",
        "SENDGRID_API_KEY",
        "SLACK_WEBHOOK_URL",
        "DISCORD_WEBHOOK_URL",
        "HITL_WEBHOOK_URL",
        "HITL_ADMIN_EMAIL",
    )
    values = [env[name] for name in names if env.get(name)]
    return [
        *values,
        "slacksecretpath123",
        "discordsecrettoken",
        "hitl-secret-path-77",
        "AAtelegram-bot-token",
    ]


def assert_no_secret(where: str, value: Any, secrets: list[str]) -> None:
    """Fail if any secret occurs in ``value`` (serialized)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    leaked = [s for s in secrets if s in text]
    assert not leaked, f"{where} leaks {leaked}"
