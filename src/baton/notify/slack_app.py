"""Slack through a Slack app's Web API: Block Kit messages whose Approve/Reject buttons carry the request id.

apprise posts plain text to an incoming webhook; it cannot post a message with buttons. A request's
announcement therefore goes through ``slack_sdk``'s :class:`~slack_sdk.WebClient` (``chat.postMessage``
with ``blocks``) when ``SLACK_BOT_TOKEN`` and ``SLACK_CHANNEL_ID`` are set; ``BATON_SLACK_API_URL``
points it elsewhere (a loopback fake in tests). The buttons are added only when ``SLACK_SIGNING_SECRET``
is set too, so that a press can be verified (:mod:`baton.chat.slack`). The answer to a press goes to
the interaction's ``response_url`` through ``slack_sdk``'s :class:`~slack_sdk.webhook.WebhookClient`.
The bot token never leaves this module: not in a receipt, a log line or an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from baton.config import Settings

DEFAULT_API_URL = "https://slack.com/api/"
#: The hosts a ``response_url`` may name (besides BATON_SLACK_API_URL's host): Slack's own.
RESPONSE_HOSTS = frozenset({"hooks.slack.com", "hooks.slack-gov.com"})
APPROVE_ACTION = "baton_approve"
REJECT_ACTION = "baton_reject"
ACTIONS = {APPROVE_ACTION: True, REJECT_ACTION: False}
HEADER_MAX_CHARS = 150
SECTION_MAX_CHARS = 2900


@dataclass(frozen=True)
class Posted:
    """What ``chat.postMessage`` answered: the channel and the message's timestamp (its id)."""

    channel: str
    ts: str


def app_configured(settings: Settings) -> bool:
    """Whether announcements go through the Slack app (bot token and channel set)."""
    return bool(settings.slack_bot_token and settings.slack_channel_id)


def buttons_enabled(settings: Settings) -> bool:
    """Whether messages carry Approve/Reject: only when a press can be verified (SLACK_SIGNING_SECRET)."""
    return app_configured(settings) and bool(settings.slack_signing_secret)


def api_url(settings: Settings) -> str:
    """The Web API base URL (BATON_SLACK_API_URL, else Slack's), ending in ``/``."""
    base = settings.baton_slack_api_url or DEFAULT_API_URL
    return base if base.endswith("/") else base + "/"


def mrkdwn_escape(text: str) -> str:
    """Slack's three control characters escaped, so an agent's text cannot mention @channel or forge a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def request_blocks(request_id: str, title: str, text: str, *, buttons: bool) -> list[dict[str, Any]]:
    """The Block Kit message of a request: a header, the text, and (``buttons``) Approve and Reject."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, HEADER_MAX_CHARS)}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(mrkdwn_escape(text), SECTION_MAX_CHARS)},
        },
    ]
    if buttons:
        blocks.append(
            {
                "type": "actions",
                "block_id": "baton_decide",
                "elements": [
                    _button("Approve", APPROVE_ACTION, request_id, "primary"),
                    _button("Reject", REJECT_ACTION, request_id, "danger"),
                ],
            }
        )
    return blocks


def _button(label: str, action_id: str, request_id: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": request_id,
        "style": style,
    }


def decided_blocks(title: str, text: str, outcome: str) -> list[dict[str, Any]]:
    """The message after a decision: the same text, the buttons replaced by who decided."""
    return [
        *request_blocks("", title, text, buttons=False),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn_escape(outcome)}]},
    ]


def post_message(settings: Settings, text: str, blocks: list[dict[str, Any]], timeout: float) -> Posted:
    """``chat.postMessage`` to SLACK_CHANNEL_ID (blocking: run it in a worker thread).

    Raises ``slack_sdk.errors.SlackApiError`` (Slack answered ``ok: false`` or an HTTP error) or an
    ``OSError`` (no connection)."""
    from slack_sdk import WebClient

    client = WebClient(
        token=settings.slack_bot_token,
        base_url=api_url(settings),
        timeout=max(1, math.ceil(timeout)),
        retry_handlers=[],  # retries are the notifier's (BATON_NOTIFY_ATTEMPTS), not the SDK's
    )
    response = client.chat_postMessage(channel=settings.slack_channel_id or "", text=text, blocks=blocks)
    return Posted(str(response.get("channel") or ""), str(response.get("ts") or ""))


def response_url_allowed(settings: Settings, url: str) -> bool:
    """Whether a ``response_url`` is Slack's (https on hooks.slack.com), or on BATON_SLACK_API_URL's host."""
    split = urlsplit(url)
    if split.scheme == "https" and split.hostname in RESPONSE_HOSTS:
        return True
    if settings.baton_slack_api_url:
        own = urlsplit(settings.baton_slack_api_url)
        return split.scheme == own.scheme and split.netloc == own.netloc
    return False


def respond(url: str, payload: dict[str, Any], timeout: float) -> int:
    """POST a reply to an interaction's ``response_url``; returns the HTTP status (blocking)."""
    from slack_sdk.webhook import WebhookClient

    client = WebhookClient(url, timeout=max(1, math.ceil(timeout)), retry_handlers=[])
    return int(client.send_dict(payload).status_code)
