"""Telegram through the Bot API itself: messages with an inline keyboard, and the answers to its presses.

apprise's Telegram plugin sends text; it cannot attach an inline keyboard. A request's announcement
therefore goes out as a plain ``sendMessage`` call with ``reply_markup`` when ``TELEGRAM_WEBHOOK_SECRET``
is set (the secret Telegram sends back with every update, so a press can be verified:
:mod:`baton.chat.telegram`). ``answerCallbackQuery`` and ``editMessageText`` answer a press. Every call
goes to ``BATON_TELEGRAM_API_URL`` (default ``https://api.telegram.org``) + ``/bot<token>/<method>``;
the URL holds the token, so neither it nor an exception's text is ever reported.
"""

from __future__ import annotations

from typing import Any

import httpx

from baton.config import Settings

DEFAULT_API_URL = "https://api.telegram.org"
CALLBACK_PREFIX = "baton"
ACTIONS = {"approve": True, "reject": False}
#: Telegram's limit on an answerCallbackQuery text.
ANSWER_MAX_CHARS = 200
MESSAGE_MAX_CHARS = 4000


class BotApiError(Exception):
    """A Bot API call failed: ``transient`` when another attempt may succeed. The text never holds the URL."""

    def __init__(self, reason: str, *, transient: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


def buttons_enabled(settings: Settings) -> bool:
    """Whether announcements carry the inline keyboard (a bot, a chat and the webhook's secret token)."""
    return bool(
        settings.telegram_bot_token and settings.telegram_default_chat_id and settings.telegram_webhook_secret
    )


def callback_data(action: str, request_id: str) -> str:
    """``baton:approve:hr_…`` (at most 64 bytes, Telegram's limit)."""
    return f"{CALLBACK_PREFIX}:{action}:{request_id}"


def parse_callback_data(data: str) -> tuple[bool, str] | None:
    """``(approve, request_id)`` of a baton button's data, else None."""
    prefix, _, rest = data.partition(":")
    action, _, request_id = rest.partition(":")
    if prefix != CALLBACK_PREFIX or action not in ACTIONS or not request_id:
        return None
    return ACTIONS[action], request_id


def keyboard(request_id: str) -> dict[str, Any]:
    """The inline keyboard of an approval: Approve and Reject."""
    return {
        "inline_keyboard": [
            [
                {"text": "Approve", "callback_data": callback_data("approve", request_id)},
                {"text": "Reject", "callback_data": callback_data("reject", request_id)},
            ]
        ]
    }


async def call(settings: Settings, method: str, payload: dict[str, Any], seconds: float) -> dict[str, Any]:
    """One Bot API call (``seconds`` per socket operation); its ``result``, or :class:`BotApiError` (never naming the URL)."""
    token = settings.telegram_bot_token or ""
    base = (settings.baton_telegram_api_url or DEFAULT_API_URL).rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=seconds, follow_redirects=False) as client:
            response = await client.post(f"{base}/bot{token}/{method}", json=payload)
    except httpx.TimeoutException:
        raise BotApiError(f"{method}: no answer within {seconds:g} seconds", transient=True) from None
    except httpx.HTTPError as exc:
        raise BotApiError(f"{method}: the connection failed ({type(exc).__name__})", transient=True) from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code == 200 and isinstance(body, dict) and body.get("ok") is True:
        result = body.get("result")
        return result if isinstance(result, dict) else {"value": result}
    status = response.status_code
    described = body.get("description") if isinstance(body, dict) else None
    reason = f"{method}: HTTP {status}" + (f" ({str(described)[:200]})" if described else "")
    raise BotApiError(reason, transient=status in (408, 425, 429) or status >= 500)
