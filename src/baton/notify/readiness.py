"""Every notification channel's readiness in one list (for doctor, ``mcp_notification_channels`` and the console)."""

from __future__ import annotations

from baton.config import Settings
from baton.notify.channels import (
    DISCORD_HOSTS,
    SLACK_HOSTS,
    Readiness,
    telegram_readiness,
    webhook_readiness,
)
from baton.notify.mail import email_readiness
from baton.notify.slack_app import app_configured
from baton.notify.slack_app import buttons_enabled as slack_buttons
from baton.notify.telegram_bot import buttons_enabled as telegram_buttons


def readiness(settings: Settings) -> list[Readiness]:
    """Every channel's readiness, in CHANNELS order."""
    email = email_readiness(settings)
    if email.ready and not settings.hitl_admin_email:
        email = Readiness(
            "email", True, email.provider, (), f"{email.detail}; HITL_ADMIN_EMAIL unset, no announcements"
        )
    return [
        email,
        _telegram(settings),
        _slack(settings),
        webhook_readiness("discord", settings.discord_webhook_url, "DISCORD_WEBHOOK_URL", DISCORD_HOSTS),
        webhook_readiness("webhook", settings.hitl_webhook_url, "HITL_WEBHOOK_URL", frozenset()),
    ]


def _telegram(settings: Settings) -> Readiness:
    """Telegram, saying whether announcements carry the inline keyboard."""
    ready = telegram_readiness(settings)
    if telegram_buttons(settings):
        detail = f"{ready.detail}; approvals carry Approve/Reject (answered at /chat/telegram/webhook)"
        return Readiness(ready.channel, ready.ready, ready.provider, ready.missing, detail)
    return ready


def _slack(settings: Settings) -> Readiness:
    """Slack by incoming webhook, by the Slack app (SLACK_BOT_TOKEN + SLACK_CHANNEL_ID), or both."""
    webhook = webhook_readiness("slack", settings.slack_webhook_url, "SLACK_WEBHOOK_URL", SLACK_HOSTS)
    if not app_configured(settings):
        return webhook
    teams = ", ".join(sorted(settings.slack_teams)) or "any workspace the app is installed in"
    buttons = (
        f"approvals carry Approve/Reject (answered at /chat/slack/actions; presses from {teams})"
        if slack_buttons(settings)
        else "no buttons until SLACK_SIGNING_SECRET is set"
    )
    app = f"Slack app chat.postMessage for announcements, {buttons}"
    if webhook.ready:
        return Readiness("slack", True, "slack", (), f"{webhook.detail}; {app}")
    return Readiness("slack", True, "slack_app", (), app)
