"""Announcing a request with buttons: Slack (Block Kit, :mod:`baton.notify.slack_app`) and Telegram (an
inline keyboard, :mod:`baton.notify.telegram_bot`), with the notifier's retries and a ``notification``
receipt per send, like every other channel.

Buttons go only on a request a chat press may decide: an approval that one person decides without a
passkey step-up. Any other request is announced with the same text and no buttons; its last line says
where to decide (the inbox page, which needs a login).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

from baton.errors import NotificationError
from baton.evidence.redaction import chat_hint
from baton.identity.public_url import request_page
from baton.notify import slack_app, telegram_bot
from baton.notify.channels import Target
from baton.notify.delivery import LOG_FILTER, DeliveryPolicy, Outcome, install_log_filter
from baton.runtime import Runtime


class Notifier(Protocol):
    """What this module needs of :class:`baton.notify.service.Notifier` (which imports this module)."""

    runtime: Runtime
    policy: DeliveryPolicy

    def receipt(self, target: Target, outcome: Outcome, purpose: str) -> int | None:
        """Append a ``notification`` receipt."""
        ...


#: One attempt: None when delivered, else ``(reason, transient)``.
Attempt = Callable[[], Awaitable[tuple[str, bool] | None]]


def chat_decidable(request: dict[str, Any]) -> bool:
    """Whether a press in chat may decide ``request`` (else the chat gets a link to the inbox)."""
    return (
        request.get("kind") == "approval"
        and int(request.get("required_approvals") or 1) <= 1
        and not request.get("step_up")
    )


def why_not_here(request: dict[str, Any], page: str | None) -> str:
    """The line that replaces the buttons on a request chat cannot decide."""
    if request.get("kind") != "approval":
        reason = "An answer is typed"
    elif request.get("step_up"):
        reason = "This approval needs a passkey step-up"
    else:
        reason = f"This approval needs {request.get('required_approvals')} different people"
    return f"{reason}: decide in the inbox{f' ({page})' if page else ''}."


async def announce_slack(
    notifier: Notifier, request: dict[str, Any], title: str, text: str
) -> dict[str, Any]:
    """Post the request to SLACK_CHANNEL_ID with Approve/Reject (when a press can be verified and decide)."""
    settings = notifier.runtime.settings
    request_id = str(request.get("request_id"))
    buttons = slack_app.buttons_enabled(settings) and chat_decidable(request)
    if not buttons and not chat_decidable(request):
        text = f"{text}\n{why_not_here(request, request_page(notifier.runtime, request_id))}"
    text = notifier.runtime.redactor.text(text)
    blocks = slack_app.request_blocks(request_id, title, text, buttons=buttons)
    result = await _post_slack(notifier, title, blocks, "hitl_announcement")
    return {**result, "buttons": buttons}


async def post_slack_text(notifier: Notifier, text: str, purpose: str) -> dict[str, Any]:
    """A plain message through the Slack app, for ``mcp_send_slack_message`` when no webhook is configured."""
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": slack_app.mrkdwn_escape(text)[:2900]}}]
    return await _post_slack(notifier, text[:2900], blocks, purpose)


async def announce_telegram(
    notifier: Notifier, request: dict[str, Any], title: str, text: str
) -> dict[str, Any]:
    """``sendMessage`` to TELEGRAM_DEFAULT_CHAT_ID with the inline keyboard (when a press may decide)."""
    settings = notifier.runtime.settings
    request_id = str(request.get("request_id"))
    buttons = chat_decidable(request)
    body = f"{title}\n\n{text}"
    if not buttons:
        body = f"{body}\n{why_not_here(request, request_page(notifier.runtime, request_id))}"
    body = notifier.runtime.redactor.text(body)[: telegram_bot.MESSAGE_MAX_CHARS]
    chat = settings.telegram_default_chat_id or ""
    payload: dict[str, Any] = {"chat_id": chat, "text": body, "link_preview_options": {"is_disabled": True}}
    if buttons:
        payload["reply_markup"] = telegram_bot.keyboard(request_id)
    timeout = notifier.policy.timeout_seconds

    async def once() -> tuple[str, bool] | None:
        try:
            await telegram_bot.call(settings, "sendMessage", payload, timeout)
        except telegram_bot.BotApiError as exc:
            return exc.reason, exc.transient
        return None

    target = Target(
        "telegram",
        "telegram_bot_api",
        chat_hint(chat),
        "",
        body,
        secrets=(settings.telegram_bot_token or "", chat),
        content=payload,
    )
    result = await _deliver(notifier, target, once)
    return {**result, "buttons": buttons}


async def _post_slack(
    notifier: Notifier, text: str, blocks: list[dict[str, Any]], purpose: str
) -> dict[str, Any]:
    """``chat.postMessage`` with retries and a receipt."""
    settings = notifier.runtime.settings
    timeout = notifier.policy.timeout_seconds
    posted: list[slack_app.Posted] = []

    async def once() -> tuple[str, bool] | None:
        from slack_sdk.errors import SlackApiError

        try:
            posted.append(
                await anyio.to_thread.run_sync(
                    slack_app.post_message, settings, text, blocks, timeout, abandon_on_cancel=True
                )
            )
        except SlackApiError as exc:
            status = int(getattr(exc.response, "status_code", 0) or 0)
            error = str(exc.response.get("error") or "") if exc.response is not None else ""
            return f"chat.postMessage: HTTP {status} {error}".strip(), status == 429 or status >= 500
        except OSError as exc:
            return f"chat.postMessage: the connection failed ({type(exc).__name__})", True
        return None

    target = Target(
        "slack",
        "slack_app",
        f"channel …{(settings.slack_channel_id or '')[-3:]}",
        "",
        text,
        secrets=(settings.slack_bot_token or "",),
        content={"text": text, "blocks": blocks},
    )
    result = await _deliver(notifier, target, once, purpose)
    return {**result, "ts": posted[-1].ts if posted else None}


async def _deliver(
    notifier: Notifier, target: Target, once: Attempt, purpose: str = "hitl_announcement"
) -> dict[str, Any]:
    """Run ``once`` with the notifier's attempts and backoff; a receipt either way; raise when undelivered."""
    install_log_filter()
    LOG_FILTER.remember(target.secrets)
    outcome = await retrying(notifier.policy, once)
    scrub = notifier.runtime.redactor
    if outcome.reason:
        reason = scrub.text(outcome.reason)
        for secret in target.secrets:
            reason = reason.replace(secret, "[REDACTED]") if secret else reason
        outcome = Outcome(outcome.delivered, outcome.attempts, reason, outcome.seconds)
    seq = notifier.receipt(target, outcome, purpose)
    if not outcome.delivered:
        raise NotificationError(
            "notification_delivery_failed",
            f"The {target.channel} notification was not delivered after {outcome.attempts} attempt(s).",
            channel=target.channel,
            provider=target.provider,
            recipient=target.recipient,
            attempts=outcome.attempts,
            reason=outcome.reason,
            receipt_seq=seq,
        )
    return {
        "channel": target.channel,
        "provider": target.provider,
        "recipient": target.recipient,
        "delivered": True,
        "attempts": outcome.attempts,
        "receipt_seq": seq,
    }


async def retrying(policy: DeliveryPolicy, once: Attempt) -> Outcome:
    """Attempt until delivered, a failure that is not transient, or the attempts run out."""
    started = time.monotonic()
    failure: tuple[str, bool] | None = ("not attempted", True)
    count = 0
    with anyio.move_on_after(policy.total_deadline) as scope:
        for count in range(1, policy.attempts + 1):
            with anyio.move_on_after(policy.attempt_deadline) as attempt:
                failure = await once()
            if attempt.cancelled_caught:
                failure = (f"no answer within {policy.attempt_deadline:g} seconds", True)
            if failure is None or not failure[1] or count == policy.attempts:
                break
            await anyio.sleep(policy.backoff_seconds * float(2 ** (count - 1)))
    if scope.cancelled_caught:
        failure = (f"no delivery within {policy.total_deadline:g} seconds", True)
    seconds = round(time.monotonic() - started, 3)
    return Outcome(failure is None, count, failure[0] if failure else None, seconds)
