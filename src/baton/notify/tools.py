"""The notification tools of SPEC.md section 3 (the only module here that knows about MCP)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry
from baton.notify.mail import EMAIL_ADDRESS
from baton.notify.service import HitlAnnouncer, Notifier


class EmailArgs(ToolArgs):
    """Arguments of ``mcp_send_email``."""

    to_email: str = Field(pattern=EMAIL_ADDRESS, max_length=320, description="One plain email address.")
    subject: str = Field(max_length=998, description="The subject line.")
    body: str = Field(description="The plain-text body.")


class TelegramArgs(ToolArgs):
    """Arguments of ``mcp_send_telegram_message``."""

    message: str = Field(min_length=1, max_length=4096, description="The message text.")
    chat_id: str | None = Field(
        None, max_length=64, description="The chat; default TELEGRAM_DEFAULT_CHAT_ID."
    )
    parse_mode: str | None = Field(
        None, max_length=16, description="HTML, Markdown or MarkdownV2; default plain text."
    )

    @field_validator("chat_id", mode="before")
    @classmethod
    def _chat_id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class MessageArgs(ToolArgs):
    """Arguments of the Slack and Discord tools."""

    message: str = Field(min_length=1, description="The message text.")


class WebhookArgs(ToolArgs):
    """Arguments of ``mcp_send_webhook``."""

    payload: dict[str, Any] = Field(description="The JSON object to POST, exactly as given.")
    url: str | None = Field(None, max_length=2048, description="An http(s) URL; default HITL_WEBHOOK_URL.")


class NoArgs(ToolArgs):
    """No arguments."""


def register(registry: ToolRegistry) -> None:
    """Add the notification tools and publish the notifier and HITL announcer services."""
    notifier = Notifier(registry.runtime)
    registry.runtime.services["notifier"] = notifier
    registry.runtime.services["hitl_announcer"] = HitlAnnouncer(notifier)

    @registry.tool("mcp_send_email", EmailArgs)
    async def send_email(args: EmailArgs, ctx: CallContext) -> dict[str, Any]:
        """Send a plain-text email through SMTP or SendGrid.

        An unconfigured channel answers notification_not_configured with the missing variables and
        sends nothing."""
        return await notifier.send_email(args.to_email, args.subject, args.body)

    @registry.tool("mcp_send_telegram_message", TelegramArgs)
    async def send_telegram(args: TelegramArgs, ctx: CallContext) -> dict[str, Any]:
        """Send a Telegram message through the Bot API.

        It goes to chat_id, by default TELEGRAM_DEFAULT_CHAT_ID."""
        return await notifier.send_telegram(args.message, args.chat_id, args.parse_mode)

    @registry.tool("mcp_send_slack_message", MessageArgs)
    async def send_slack(args: MessageArgs, ctx: CallContext) -> dict[str, Any]:
        """Post a message to the Slack incoming webhook SLACK_WEBHOOK_URL."""
        return await notifier.send_slack(args.message)

    @registry.tool("mcp_send_discord_message", MessageArgs)
    async def send_discord(args: MessageArgs, ctx: CallContext) -> dict[str, Any]:
        """Post a message to the Discord webhook DISCORD_WEBHOOK_URL."""
        return await notifier.send_discord(args.message)

    @registry.tool("mcp_send_webhook", WebhookArgs)
    async def send_webhook(args: WebhookArgs, ctx: CallContext) -> dict[str, Any]:
        """POST a JSON object to a webhook.

        It goes to url, by default HITL_WEBHOOK_URL. A url must be a public internet address unless the
        operator allows it; otherwise notification_destination_refused, and nothing is sent."""
        return await notifier.send_webhook(args.payload, args.url)

    @registry.tool("mcp_notification_channels", NoArgs, read_only=True, quiet=True)
    async def notification_channels(args: NoArgs, ctx: CallContext) -> dict[str, Any]:
        """Report the readiness of each notification channel.

        Each shows its provider and missing variables, never a secret."""
        rows = [r.as_dict() for r in notifier.channels()]
        return {"channels": rows, "ready": [r["channel"] for r in rows if r["ready"]]}
