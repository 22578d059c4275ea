"""Registering baton's Telegram webhook with the Bot API: ``setWebhook`` and ``getWebhookInfo``.

Telegram delivers button presses only to the URL a bot registered with ``setWebhook``, and sends the
``secret_token`` given there with every update. Done by hand, that call puts the bot token on a command
line; here it is made from the configured settings: the URL is ``BATON_PUBLIC_URL`` + the webhook path
(or one given), the secret is ``TELEGRAM_WEBHOOK_SECRET``, and only ``callback_query`` updates are asked
for. Nothing printed or raised names the token or the secret.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from baton.chat.web import TELEGRAM_WEBHOOK_PATH
from baton.config import Settings
from baton.errors import ChatError
from baton.notify import telegram_bot

#: What Telegram accepts as a ``secret_token``: 1–256 of ``A-Z a-z 0-9 _ -``.
SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
#: The only updates baton handles; others would be posted and ignored.
ALLOWED_UPDATES = ["callback_query"]
CALL_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class WebhookState:
    """The webhook as Telegram reports it (``getWebhookInfo``), beside the URL baton expects."""

    url: str
    expected_url: str
    matches: bool
    pending_update_count: int
    allowed_updates: list[str] | None
    last_error_message: str | None
    last_error_date: int | None

    def as_dict(self) -> dict[str, Any]:
        """The state as the CLI prints it with ``--json``."""
        return asdict(self)


def webhook_url(settings: Settings, url: str | None) -> str:
    """The URL Telegram should post to: ``url``, or ``BATON_PUBLIC_URL`` + the webhook path (HTTPS only)."""
    base = url or (
        settings.baton_public_url.rstrip("/") + TELEGRAM_WEBHOOK_PATH if settings.baton_public_url else None
    )
    if base is None:
        raise ChatError(
            "chat_webhook_url_invalid",
            "No webhook URL: set BATON_PUBLIC_URL to the address baton serve --http is reached at, or "
            f"pass --url (https://HOST{TELEGRAM_WEBHOOK_PATH}).",
        )
    parts = urlsplit(base)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        raise ChatError(
            "chat_webhook_url_invalid",
            "Telegram posts updates only to an https:// URL with a host and no credentials in it.",
        )
    if parts.path.rstrip("/") != TELEGRAM_WEBHOOK_PATH:
        raise ChatError(
            "chat_webhook_url_invalid",
            f"The webhook URL must end in {TELEGRAM_WEBHOOK_PATH}, the route baton serves presses on.",
        )
    return base


def _check_configured(settings: Settings) -> str:
    if not settings.telegram_bot_token:
        raise ChatError("chat_webhook_not_configured", "TELEGRAM_BOT_TOKEN is unset; nothing was sent.")
    secret = settings.telegram_webhook_secret
    if not secret:
        raise ChatError(
            "chat_webhook_not_configured",
            "TELEGRAM_WEBHOOK_SECRET is unset: without it baton refuses every update; nothing was sent.",
        )
    if not SECRET_TOKEN.match(secret):
        raise ChatError(
            "chat_webhook_not_configured",
            "TELEGRAM_WEBHOOK_SECRET must be 1-256 of A-Z, a-z, 0-9, _ and - (Telegram's rule for a "
            "secret_token); nothing was sent.",
        )
    return secret


async def _api(settings: Settings, method: str, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        return await telegram_bot.call(settings, method, payload, CALL_TIMEOUT_SECONDS)
    except telegram_bot.BotApiError as exc:
        raise ChatError("chat_api_failed", f"Telegram's Bot API refused or was not reached: {exc}") from None


async def webhook_info(settings: Settings, url: str | None = None) -> WebhookState:
    """``getWebhookInfo``, compared with the URL baton expects."""
    _check_configured(settings)
    expected = webhook_url(settings, url)
    info = await _api(settings, "getWebhookInfo", {})
    registered = str(info.get("url") or "")
    allowed = info.get("allowed_updates")
    error_date = info.get("last_error_date")
    return WebhookState(
        url=registered,
        expected_url=expected,
        matches=registered == expected,
        pending_update_count=int(info.get("pending_update_count") or 0),
        allowed_updates=[str(u) for u in allowed] if isinstance(allowed, list) else None,
        last_error_message=str(info["last_error_message"]) if info.get("last_error_message") else None,
        last_error_date=int(error_date) if isinstance(error_date, int) else None,
    )


async def set_webhook(settings: Settings, url: str | None = None) -> WebhookState:
    """``setWebhook`` with the URL, the secret token and ``callback_query`` only; then the state Telegram reports."""
    secret = _check_configured(settings)
    target = webhook_url(settings, url)
    await _api(
        settings, "setWebhook", {"url": target, "secret_token": secret, "allowed_updates": ALLOWED_UPDATES}
    )
    return await webhook_info(settings, target)
