"""Telegram's webhook: an update whose ``callback_query`` is a press on a baton inline keyboard.

Telegram sends every update as JSON to the URL given to ``setWebhook``, with the ``secret_token`` given
there in ``X-Telegram-Bot-Api-Secret-Token``; anything without ``TELEGRAM_WEBHOOK_SECRET`` there is
refused with 401 (``chat_signature_invalid``) and decides nothing. A verified press is decided by
:class:`baton.chat.decide.ChatDecider`; after the 200, ``answerCallbackQuery`` tells the presser what
happened (an alert with the inbox page when nothing was decided) and ``editMessageText`` replaces the
keyboard with who decided.

Why a webhook and not ``getUpdates``: ``baton serve --http`` already serves the Slack callback and the
inbox behind the same guards; a webhook needs no poller that every replica would run (Telegram hands
each update to one ``getUpdates`` caller and a webhook excludes polling), and each update arrives once
at whichever replica the proxy picks, which decides through the shared store.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from baton.chat.decide import ChatDecider, ChatOutcome
from baton.chat.http import refuse
from baton.errors import ChatError
from baton.identity.chat_identities import USER_ID_PATTERNS, ChatIdentity
from baton.identity.links import same
from baton.notify import telegram_bot
from baton.runtime import Runtime

log = logging.getLogger("baton.chat")

CALL_TIMEOUT_SECONDS = 10.0


def baton_press(update: Any) -> tuple[ChatIdentity, str, bool, dict[str, Any]] | None:
    """``(presser, request_id, approve, callback_query)`` of a baton button press; None for other updates."""
    if not isinstance(update, dict):
        raise ChatError("chat_payload_invalid", "The Telegram update is not a JSON object.")
    query = update.get("callback_query")
    if not isinstance(query, dict):
        return None
    parsed = telegram_bot.parse_callback_data(str(query.get("data") or ""))
    if parsed is None:
        return None
    sender = query.get("from")
    user_id = str(sender.get("id")) if isinstance(sender, dict) else ""
    if not USER_ID_PATTERNS["telegram"].match(user_id) or not isinstance(query.get("id"), str):
        raise ChatError("chat_payload_invalid", "The Telegram callback names no valid user or query id.")
    approve, request_id = parsed
    return ChatIdentity("telegram", user_id), request_id, approve, query


class TelegramWebhook:
    """``POST /chat/telegram/webhook``: the URL given to the bot's ``setWebhook``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.decider = ChatDecider(runtime)

    async def handle(self, request: Request) -> Response:
        """Check the secret token, decide (or link), acknowledge; the answers follow."""
        settings = self.runtime.settings
        secret = settings.telegram_webhook_secret
        if not secret or not settings.telegram_bot_token:
            return refuse(request, 404, ChatError("chat_not_configured", "Telegram callbacks are off here."))
        supplied = request.headers.get("x-telegram-bot-api-secret-token", "")
        if not same(secret, supplied):
            error = ChatError("chat_signature_invalid", "The Telegram secret token does not match.")
            return refuse(request, 401, error, auth_failed=True)
        try:
            press = baton_press(json.loads(await request.body()))
        except ValueError:
            return refuse(request, 400, ChatError("chat_payload_invalid", "The Telegram update is not JSON."))
        except ChatError as exc:
            return refuse(request, 400, exc)
        if press is None:
            return JSONResponse({})  # another update (a message, someone else's button): not ours
        identity, request_id, approve, query = press
        outcome = self.decider.press(identity, request_id, approve)
        return JSONResponse({}, background=BackgroundTask(self._answer, query, outcome))

    async def _answer(self, query: dict[str, Any], outcome: ChatOutcome) -> None:
        """``answerCallbackQuery`` to the presser; ``editMessageText`` once the request is settled."""
        redact = self.runtime.redactor.text
        text = redact(outcome.text)[: telegram_bot.ANSWER_MAX_CHARS]
        answer = {"callback_query_id": query["id"], "text": text, "show_alert": outcome.kind != "decided"}
        await self._call("answerCallbackQuery", answer)
        message = query.get("message")
        settled = outcome.view is not None and outcome.view.get("status") != "pending"
        if not settled or not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
            return
        line = outcome.outcome_line if outcome.kind == "decided" else outcome.text
        original = str(message.get("text") or "")
        edited = {
            "chat_id": message["chat"].get("id"),
            "message_id": message.get("message_id"),
            "text": redact(f"{original}\n\n{line}".strip())[: telegram_bot.MESSAGE_MAX_CHARS],
        }
        await self._call("editMessageText", edited)

    async def _call(self, method: str, payload: dict[str, Any]) -> None:
        try:
            await telegram_bot.call(self.runtime.settings, method, payload, CALL_TIMEOUT_SECONDS)
        except telegram_bot.BotApiError as exc:
            log.warning("Telegram %s failed: %s", method, self.runtime.redactor.text(exc.reason))
