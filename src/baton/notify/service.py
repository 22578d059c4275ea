"""The notifier service: sends on a channel, writes a ``notification`` receipt per send, announces HITL requests.

Published as ``runtime.services["notifier"]`` (:class:`Notifier`, used by the tools and by
timers) and ``runtime.services["hitl_announcer"]`` (:class:`HitlAnnouncer`, used by the
human-in-the-loop broker). Outbound text is redacted like everything else baton writes:
a configured credential never leaves in a message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio

from baton.errors import ArgumentError, BatonError, NotificationError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.notify import channels, mail, slack_app, telegram_bot
from baton.notify.channels import Readiness, Target
from baton.notify.delivery import DeliveryPolicy, Outcome, deliver
from baton.notify.destinations import DestinationRefusedError
from baton.notify.readiness import readiness
from baton.notify.request_text import announcement_text
from baton.runtime import Runtime
from baton.telemetry.tracing import span

log = logging.getLogger("baton.notify")

DISCORD_MAX_CHARS = 1900
#: Purposes whose webhook payload the agent wrote (``mcp_send_webhook``, a timer): never signed as baton's.
AGENT_PURPOSES = frozenset({"tool", "timer"})
TELEGRAM_MAX_CHARS = 4000


class Notifier:
    """Sends on one channel at a time; each send (or refusal) leaves a ``notification`` receipt."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.policy = DeliveryPolicy.from_settings(runtime.settings)

    def channels(self) -> list[Readiness]:
        """Every channel's readiness (no secrets)."""
        return readiness(self.runtime.settings)

    async def send_email(
        self, to_email: str, subject: str, body: str, *, purpose: str = "tool"
    ) -> dict[str, Any]:
        """Email ``to_email``; raises NotificationError when unconfigured or undelivered."""
        clean = self.runtime.redactor.text
        return await self._send(
            "email",
            lambda: mail.email_target(self.runtime.settings, to_email, clean(subject), clean(body)),
            purpose,
        )

    async def send_telegram(
        self,
        message: str,
        chat_id: str | None = None,
        parse_mode: str | None = None,
        *,
        purpose: str = "tool",
    ) -> dict[str, Any]:
        """A Telegram message to ``chat_id`` or TELEGRAM_DEFAULT_CHAT_ID."""
        text = self.runtime.redactor.text(message)
        return await self._send(
            "telegram",
            lambda: channels.telegram_target(self.runtime.settings, text, chat_id, parse_mode),
            purpose,
        )

    async def send_slack(self, message: str, *, purpose: str = "tool") -> dict[str, Any]:
        """A message to SLACK_WEBHOOK_URL (else, with only a Slack app configured, to SLACK_CHANNEL_ID)."""
        text = self.runtime.redactor.text(message)
        settings = self.runtime.settings
        if not settings.slack_webhook_url and slack_app.app_configured(settings):
            from baton.notify.interactive import post_slack_text

            return await post_slack_text(self, text, purpose)
        return await self._send("slack", lambda: channels.slack_target(settings, text), purpose)

    async def send_discord(self, message: str, *, purpose: str = "tool") -> dict[str, Any]:
        """A message to DISCORD_WEBHOOK_URL."""
        text = self.runtime.redactor.text(message)
        return await self._send(
            "discord", lambda: channels.discord_target(self.runtime.settings, text), purpose
        )

    async def send_webhook(
        self, payload: dict[str, Any], url: str | None = None, *, purpose: str = "tool"
    ) -> dict[str, Any]:
        """A JSON POST of ``payload`` to ``url`` or HITL_WEBHOOK_URL; baton's own (any purpose but an agent's
        tool call or timer) is signed."""
        body = self.runtime.redactor.value(payload)
        signed = purpose not in AGENT_PURPOSES
        settings = self.runtime.settings
        return await self._send(
            "webhook", lambda: channels.webhook_target(settings, body, url, signed=signed), purpose
        )

    async def send(self, channel: str, message: str, **options: Any) -> dict[str, Any]:
        """Send ``message`` on ``channel`` for a caller that wants a result, not an exception (timers)."""
        try:
            return {"success": True, **await self._dispatch(channel, message, options)}
        except BatonError as exc:
            return self.runtime.redactor.value(exc.to_result())  # type: ignore[no-any-return]

    async def _dispatch(self, channel: str, message: str, options: dict[str, Any]) -> dict[str, Any]:
        purpose = str(options.pop("purpose", "timer"))
        if channel == "email":
            to_email = options.get("to_email") or self.runtime.settings.hitl_admin_email
            if not to_email:
                raise channels.not_configured("email", ["HITL_ADMIN_EMAIL"])
            subject = options.get("subject") or "baton notification"
            return await self.send_email(to_email, subject, message, purpose=purpose)
        if channel == "telegram":
            return await self.send_telegram(
                message, options.get("chat_id"), options.get("parse_mode"), purpose=purpose
            )
        if channel == "slack":
            return await self.send_slack(message, purpose=purpose)
        if channel == "discord":
            return await self.send_discord(message, purpose=purpose)
        if channel == "webhook":
            payload = options.get("payload") or {"event": "notification", "message": message}
            return await self.send_webhook(payload, options.get("url"), purpose=purpose)
        raise ArgumentError(
            "invalid_arguments", f"Unknown channel {channel!r}; use one of {', '.join(channels.CHANNELS)}."
        )

    async def _send(self, channel: str, build: Callable[[], Target], purpose: str) -> dict[str, Any]:
        try:
            target = build()
        except NotificationError as exc:
            if exc.error_class == "notification_not_configured":
                self._receipt_refusal(channel, exc, purpose)
            raise
        attributes = {"baton.notify.channel": channel, "baton.notify.provider": target.provider}
        with span(f"notify {channel}", {**attributes, "baton.notify.purpose": purpose}) as current:
            outcome = await deliver(target, self.policy, self.runtime.redactor)
            current.set_attribute("baton.notify.delivered", outcome.delivered)
        seq = self.receipt(target, outcome, purpose)
        if outcome.refused:
            raise DestinationRefusedError()  # one answer for every refused destination, whatever is there
        if not outcome.delivered:
            raise NotificationError(
                "notification_delivery_failed",
                f"The {channel} notification was not delivered after {outcome.attempts} attempt(s).",
                channel=channel,
                provider=target.provider,
                recipient=target.recipient,
                attempts=outcome.attempts,
                reason=outcome.reason,
                receipt_seq=seq,
            )
        return {
            "channel": channel,
            "provider": target.provider,
            "recipient": target.recipient,
            "delivered": True,
            "attempts": outcome.attempts,
            "receipt_seq": seq,
        }

    def receipt(self, target: Target, outcome: Outcome, purpose: str) -> int | None:
        """Append the ``notification`` receipt of one send; its seq (None when the chain refused it)."""
        payload = {
            "channel": target.channel,
            "provider": target.provider,
            "recipient": target.recipient,
            "outcome": _outcome(outcome),
            "purpose": purpose,
            "attempts": outcome.attempts,
            "duration_seconds": outcome.seconds,
            "message_sha256": sha256_hex(canonical_json(_content(target))),
            "error_class": _failure_class(outcome),
            "reason": outcome.reason,
        }
        return self._append(payload)

    def _receipt_refusal(self, channel: str, exc: NotificationError, purpose: str) -> None:
        payload = {
            "channel": channel,
            "outcome": "not_configured",
            "purpose": purpose,
            "attempts": 0,
            "error_class": exc.error_class,
            "missing": exc.details.get("missing", []),
        }
        self._append(payload)

    def _append(self, payload: dict[str, Any]) -> int | None:
        try:
            return self.runtime.receipts.append("notification", payload).seq
        except BatonError:
            log.exception("notification receipt refused")
            return None


class HitlAnnouncer:
    """Tells every configured channel about a new human-in-the-loop request; never raises."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    async def announce(self, request: dict[str, Any], link: str | None) -> list[dict[str, Any]]:
        """Send the request (and its signed inbox link, when given) on each configured channel."""
        try:
            sends = self._sends(json.loads(json.dumps(request, default=str)), link)
        except Exception:
            log.exception("HITL announcement could not be prepared")
            return []
        results: list[dict[str, Any]] = []

        async def run(channel: str, send: Any) -> None:
            try:
                outcome = await send()
                results.append({"success": True, **outcome})
            except BatonError as exc:
                results.append({"channel": channel, **exc.to_result()})
            except Exception:  # an announcement must never break the request it announces
                log.exception("HITL announcement on %s failed unexpectedly", channel)
                results.append({"channel": channel, "success": False, "error_class": "internal_error"})

        try:
            async with anyio.create_task_group() as group:
                for channel, send in sends:
                    group.start_soon(run, channel, send)
        except Exception:
            log.exception("HITL announcement failed")
        order = {name: index for index, name in enumerate(channels.CHANNELS)}
        redact = self.notifier.runtime.redactor.value
        return [redact(r) for r in sorted(results, key=lambda r: order.get(str(r.get("channel")), 99))]

    def planned_channels(self) -> list[str]:
        """The channels a new request goes out on, in order (what ``reached_via`` names before delivery)."""
        settings = self.notifier.runtime.settings
        ready = {r.channel: r for r in self.notifier.channels()}
        planned: list[str] = []
        if ready["email"].ready and settings.hitl_admin_email:
            planned.append("email")
        if telegram_bot.buttons_enabled(settings) or ready["telegram"].ready:
            planned.append("telegram")
        if slack_app.app_configured(settings) or ready["slack"].ready:
            planned.append("slack")
        planned += [name for name in ("discord", "webhook") if ready[name].ready]
        return planned

    def _sends(self, request: dict[str, Any], link: str | None) -> list[tuple[str, Any]]:
        from baton.notify import interactive

        settings = self.notifier.runtime.settings
        title, text = announcement_text(request, link)
        n = self.notifier
        sends: list[tuple[str, Any]] = []
        planned = self.planned_channels()
        if "email" in planned:
            admin = str(settings.hitl_admin_email)
            sends.append(("email", lambda: n.send_email(admin, title, text, purpose="hitl_announcement")))
        if telegram_bot.buttons_enabled(settings):  # the Bot API itself: an inline keyboard
            sends.append(("telegram", lambda: interactive.announce_telegram(n, request, title, text)))
        elif "telegram" in planned:
            chat = f"{title}\n\n{text}"[:TELEGRAM_MAX_CHARS]
            sends.append(("telegram", lambda: n.send_telegram(chat, purpose="hitl_announcement")))
        if slack_app.app_configured(settings):  # the Slack app: Block Kit with Approve/Reject
            sends.append(("slack", lambda: interactive.announce_slack(n, request, title, text)))
        elif "slack" in planned:
            sends.append(("slack", lambda: n.send_slack(f"*{title}*\n{text}", purpose="hitl_announcement")))
        if "discord" in planned:
            short = f"**{title}**\n{text}"[:DISCORD_MAX_CHARS]
            sends.append(("discord", lambda: n.send_discord(short, purpose="hitl_announcement")))
        if "webhook" in planned:
            payload = {"event": "hitl_request", "request": request, "link": link}
            sends.append(("webhook", lambda: n.send_webhook(payload, purpose="hitl_announcement")))
        return sends


def _outcome(outcome: Outcome) -> str:
    return "delivered" if outcome.delivered else "refused" if outcome.refused else "failed"


def _failure_class(outcome: Outcome) -> str | None:
    if outcome.delivered:
        return None
    return "notification_destination_refused" if outcome.refused else "notification_delivery_failed"


def _content(target: Target) -> Any:
    return target.content if target.content is not None else {"title": target.title, "body": target.body}
