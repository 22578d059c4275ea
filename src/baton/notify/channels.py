"""Notification channels (SPEC.md section 3): which are configured, and the apprise service of each send.

Each channel is built from :class:`~baton.config.Settings` into a :class:`Target`: the
``Apprise.instantiate()`` description of one destination, the message, a recipient hint a
receipt may show, and the secret values that must never leave this module. Official apprise
plugins carry the real services (``mailto``/``mailtos``, ``sendgrid``, ``tgram``, native Slack
and Discord webhook URLs). Endpoints those plugins cannot reach (a Slack- or Discord-compatible
webhook on another host, ``BATON_TELEGRAM_API_URL``, ``BATON_SENDGRID_API_URL``) go through apprise's
generic ``json://`` plugin with the service's own payload shape. The generic webhook is posted by baton
itself (:mod:`baton.notify.webhook`), so the address it connects to can be checked.
The email channel lives in :mod:`baton.notify.mail`; every channel's readiness in
:mod:`baton.notify.readiness`. Nothing here imports apprise or touches
the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from baton.config import Settings
from baton.errors import ArgumentError, ConfigError, NotificationError
from baton.evidence.redaction import chat_hint, url_hint

if TYPE_CHECKING:
    from baton.notify.destinations import DestinationPolicy

CHANNELS: tuple[str, ...] = ("email", "telegram", "slack", "discord", "webhook")
SLACK_HOSTS = frozenset({"hooks.slack.com", "hooks.slack-gov.com"})
DISCORD_HOSTS = frozenset({"discord.com", "discordapp.com"})
#: The keys of apprise's JSON envelope; a generic payload may only use title/message, as strings.
JSON_ENVELOPE_KEYS = ("version", "title", "message", "attachments", "type")
TELEGRAM_PARSE_MODES = {"html": "HTML", "markdown": "Markdown", "markdownv2": "MarkdownV2"}


@dataclass(frozen=True)
class Readiness:
    """Whether a channel can send, through which provider, and the variables it still lacks."""

    channel: str
    ready: bool
    provider: str | None
    missing: tuple[str, ...] = ()
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The readiness as a JSON object (no secret is ever part of it)."""
        return {
            "channel": self.channel,
            "ready": self.ready,
            "provider": self.provider,
            "missing": list(self.missing),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Target:
    """One destination, ready for apprise: ``service`` and ``secrets`` never leave the notify package."""

    channel: str
    provider: str
    recipient: str
    service: dict[str, Any] | str
    body: str
    title: str = ""
    body_format: str = "text"
    secrets: tuple[str, ...] = field(default=(), repr=False)
    #: What the receipt's message_sha256 covers when it is not ``{title, body}`` (a webhook payload).
    content: Any = field(default=None, repr=False)
    #: The generic webhook is posted by baton itself (:mod:`baton.notify.webhook`), not by apprise.
    post: WebhookPost | None = field(default=None, repr=False)


@dataclass(frozen=True)
class WebhookPost:
    """One JSON POST: the URL, the exact body, and the destination rule (None: the operator's URL)."""

    url: str
    body: bytes
    guard: DestinationPolicy | None
    #: The Standard Webhooks key baton signs its own posts with (None: unsigned, the agent's payloads).
    signing_key: bytes | None = field(default=None, repr=False)
    #: The ``webhook-id``: the same for every retry of this one message.
    message_id: str = ""


def not_configured(channel: str, missing: list[str] | tuple[str, ...]) -> NotificationError:
    """The fail-closed answer for a channel that lacks configuration: nothing is attempted."""
    names = ", ".join(missing)
    return NotificationError(
        "notification_not_configured",
        f"The {channel} channel is not configured; set {names}.",
        channel=channel,
        missing=list(missing),
    )


def _http_url(url: str, variable: str) -> Any:
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise ConfigError("config_invalid", f"{variable} must be an http(s) URL with a host.")
    return split


def json_service(
    url: str, payload: dict[str, Any], *, variable: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """apprise's ``json://`` plugin posting ``payload`` (its envelope keys dropped or renamed) to ``url``."""
    split = _http_url(url, variable)
    extras: dict[str, Any] = {key: "" for key in JSON_ENVELOPE_KEYS}
    extras.update(payload)
    return {
        "schema": "jsons" if split.scheme == "https" else "json",
        "host": split.hostname,
        "port": split.port,
        "fullpath": split.path or "/",
        "user": unquote(split.username) if split.username else None,
        "password": unquote(split.password) if split.password else None,
        "params": dict(parse_qsl(split.query)),
        "payload": extras,
        "headers": headers or {},
        "secure": split.scheme == "https",
        "format": "text",
    }


# --- instant messaging ---------------------------------------------------------------------------


def telegram_readiness(settings: Settings) -> Readiness:
    """Telegram needs a bot token; a default chat id lets calls (and announcements) omit chat_id."""
    missing = tuple(
        name
        for name, value in (
            ("TELEGRAM_BOT_TOKEN", settings.telegram_bot_token),
            ("TELEGRAM_DEFAULT_CHAT_ID", settings.telegram_default_chat_id),
        )
        if not value
    )
    api = "BATON_TELEGRAM_API_URL" if settings.baton_telegram_api_url else "api.telegram.org"
    detail = f"Bot API via {api}" if not missing else "not configured"
    return Readiness(
        "telegram", not missing, "telegram" if settings.telegram_bot_token else None, missing, detail
    )


def telegram_target(settings: Settings, message: str, chat_id: str | None, parse_mode: str | None) -> Target:
    """A Telegram message to ``chat_id`` (default TELEGRAM_DEFAULT_CHAT_ID) with an optional parse mode."""
    chat = chat_id or settings.telegram_default_chat_id
    missing = [] if settings.telegram_bot_token else ["TELEGRAM_BOT_TOKEN"]
    if not chat:
        missing.append("TELEGRAM_DEFAULT_CHAT_ID")
    if missing or chat is None:
        raise not_configured("telegram", missing)
    token = settings.telegram_bot_token or ""
    mode = TELEGRAM_PARSE_MODES.get((parse_mode or "").lower()) if parse_mode else None
    if parse_mode and mode is None:
        raise ArgumentError("invalid_arguments", "parse_mode must be HTML, Markdown or MarkdownV2.")
    secrets = present(token, chat)
    if settings.baton_telegram_api_url:
        fields: dict[str, Any] = {"message": "text", "chat_id": chat}
        if mode:
            fields["parse_mode"] = mode
        url = f"{settings.baton_telegram_api_url.rstrip('/')}/bot{token}/sendMessage"
        service: dict[str, Any] | str = json_service(url, fields, variable="BATON_TELEGRAM_API_URL")
        return Target("telegram", "telegram", chat_hint(chat), service, message, "", "text", secrets)
    body_format = {"HTML": "html", "Markdown": "markdown", "MarkdownV2": "markdown"}.get(mode or "", "text")
    service = {
        "schema": "tgram",
        "bot_token": token,
        "targets": [chat],
        "detect_owner": False,
        "format": body_format,
        "mdv": "v2" if mode == "MarkdownV2" else "v1",
    }
    return Target("telegram", "telegram", chat_hint(chat), service, message, "", body_format, secrets)


def webhook_readiness(
    channel: str, url: str | None, variable: str, native_hosts: frozenset[str]
) -> Readiness:
    """Readiness of a channel configured by one webhook URL."""
    if not url:
        return Readiness(channel, False, None, (variable,), "not configured")
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        return Readiness(channel, False, channel, (), f"config_invalid: {variable} must be an http(s) URL")
    host = split.hostname
    if channel == "webhook":
        route = "baton's own POST"
    else:
        route = "apprise native plugin" if host in native_hosts else "apprise json:// plugin"
    return Readiness(channel, True, channel, (), f"incoming webhook at {url_hint(url)} ({route})")


def slack_target(settings: Settings, message: str) -> Target:
    """A Slack incoming-webhook message (any other host gets Slack's ``{"text": …}`` shape)."""
    return _chat_webhook(
        "slack", settings.slack_webhook_url, "SLACK_WEBHOOK_URL", SLACK_HOSTS, "text", message
    )


def discord_target(settings: Settings, message: str) -> Target:
    """A Discord webhook message (any other host gets Discord's ``{"content": …}`` shape)."""
    return _chat_webhook(
        "discord", settings.discord_webhook_url, "DISCORD_WEBHOOK_URL", DISCORD_HOSTS, "content", message
    )


def _chat_webhook(
    channel: str, url: str | None, variable: str, native: frozenset[str], key: str, message: str
) -> Target:
    if not url:
        raise not_configured(channel, [variable])
    split = _http_url(url, variable)
    secrets = present(url, split.path.strip("/"), split.query)
    if split.hostname in native:
        return Target(channel, channel, url_hint(url), url, message, "", "text", secrets)
    service = json_service(url, {"message": key}, variable=variable)
    return Target(channel, channel, url_hint(url), service, message, "", "text", secrets)


def webhook_target(
    settings: Settings, payload: dict[str, Any], url: str | None, *, signed: bool = False
) -> Target:
    """A JSON POST of exactly ``payload`` to ``url`` (the agent's choice, checked by the destination rule)
    or to HITL_WEBHOOK_URL (the operator's, trusted as configured); ``signed``: baton's own message, signed
    with HITL_WEBHOOK_SECRET when it is set, so a receiver can tell it from an agent's look-alike."""
    from baton.notify.destinations import DestinationPolicy

    endpoint = url or settings.hitl_webhook_url
    if not endpoint:
        raise not_configured("webhook", ["HITL_WEBHOOK_URL"])
    variable = "url" if url else "HITL_WEBHOOK_URL"
    problem = _webhook_url_problem(endpoint)
    if problem:
        message = f"{variable} must be an http(s) URL with a host ({problem})."
        if url:
            raise ArgumentError("invalid_arguments", message)
        raise ConfigError("config_invalid", message, variables=[variable])
    guard = DestinationPolicy.from_settings(settings) if url else None
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    split = urlsplit(endpoint)
    secrets = present(endpoint, split.path.strip("/"), split.query, split.password)
    from baton.notify.signing import message_id, signing_key

    key = signing_key(settings.hitl_webhook_secret) if signed and not url else None
    post = WebhookPost(endpoint, body, guard, key, message_id())
    return Target("webhook", "webhook", url_hint(endpoint), endpoint, "", "", "text", secrets, payload, post)


def _webhook_url_problem(url: str) -> str | None:
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        return "scheme or host missing"
    try:
        split.port  # noqa: B018 - a port that is not a number raises here
        split.hostname.encode("idna")
        (split.path + split.query).encode("ascii")
    except (ValueError, UnicodeError):
        return "the port, host or path cannot be sent as given; percent-encode the path"
    return None


def present(*values: str | None) -> tuple[str, ...]:
    """The values that are set, as a tuple of secrets."""
    return tuple(v for v in values if v)
