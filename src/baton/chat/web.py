"""The chat callback routes of ``baton serve --http`` (their own provider in ``http_serve.HTTP_ROUTE_PROVIDERS``)."""

from __future__ import annotations

from starlette.routing import Route

from baton.chat.slack import SlackActions
from baton.chat.telegram import TelegramWebhook
from baton.runtime import Runtime

SLACK_ACTIONS_PATH = "/chat/slack/actions"
TELEGRAM_WEBHOOK_PATH = "/chat/telegram/webhook"


def routes(runtime: Runtime) -> list[Route]:
    """``POST /chat/slack/actions`` (Slack's interactivity URL) and ``POST /chat/telegram/webhook``."""
    return [
        Route(SLACK_ACTIONS_PATH, SlackActions(runtime).handle, methods=["POST"]),
        Route(TELEGRAM_WEBHOOK_PATH, TelegramWebhook(runtime).handle, methods=["POST"]),
    ]
