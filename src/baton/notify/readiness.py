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


def readiness(settings: Settings) -> list[Readiness]:
    """Every channel's readiness, in CHANNELS order."""
    email = email_readiness(settings)
    if email.ready and not settings.hitl_admin_email:
        email = Readiness(
            "email", True, email.provider, (), f"{email.detail}; HITL_ADMIN_EMAIL unset, no announcements"
        )
    return [
        email,
        telegram_readiness(settings),
        webhook_readiness("slack", settings.slack_webhook_url, "SLACK_WEBHOOK_URL", SLACK_HOSTS),
        webhook_readiness("discord", settings.discord_webhook_url, "DISCORD_WEBHOOK_URL", DISCORD_HOSTS),
        webhook_readiness("webhook", settings.hitl_webhook_url, "HITL_WEBHOOK_URL", frozenset()),
    ]
