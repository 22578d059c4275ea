"""Delivery through apprise: bounded timeouts, retry with backoff for transient failures, redacted reasons.

apprise is imported inside :func:`deliver` only (it is slow to import). Each attempt builds a
fresh apprise service with the per-attempt socket timeouts (``cto``/``rto``) and a call
deadline, so a peer that never answers costs at most that deadline; apprise's structured
result (``AppriseResult``) gives the attempt's warnings, from which the reason is taken.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import anyio

from baton.config import Settings
from baton.evidence.receipts import Redactor
from baton.notify.channels import Target, WebhookPost
from baton.notify.destinations import DestinationRefusedError

log = logging.getLogger("baton.notify")

STATUS_PATTERN = re.compile(r"error=(\d{3})")
MAX_REASON_CHARS = 300
#: Loggers that see service URLs (webhook paths and bot tokens are credentials) at debug level.
THIRD_PARTY_LOGGERS = (
    "apprise",
    "urllib3.connectionpool",
    "httpx",
    "slack_sdk.web.base_client",
    "slack_sdk.webhook.client",
)


class SecretLogFilter(logging.Filter):
    """Redacts every secret a send has used from apprise's and urllib3's records, whatever their level."""

    def __init__(self) -> None:
        super().__init__("baton-secrets")
        self._secrets: frozenset[str] = frozenset()
        self._redactor = Redactor(())

    def remember(self, secrets: Iterable[str]) -> None:
        """Add values to redact from now on (the set only grows)."""
        merged = self._secrets | {s for s in secrets if s}
        if merged != self._secrets:
            self._secrets = merged
            self._redactor = Redactor(tuple(sorted(merged, key=len, reverse=True)))

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message with secrets replaced; never drops a record."""
        if self._secrets:
            message = record.getMessage()
            clean = self._redactor.text(message)
            if clean != message:
                record.msg, record.args = clean, None
        return True


LOG_FILTER = SecretLogFilter()


def install_log_filter() -> None:
    """Attach :data:`LOG_FILTER` to the third-party loggers once."""
    for name in THIRD_PARTY_LOGGERS:
        logger = logging.getLogger(name)
        if LOG_FILTER not in logger.filters:
            logger.addFilter(LOG_FILTER)


@dataclass(frozen=True)
class DeliveryPolicy:
    """How long one attempt may take, how many attempts a send gets and the first backoff."""

    timeout_seconds: float = 10.0
    attempts: int = 3
    backoff_seconds: float = 0.5

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliveryPolicy:
        """BATON_NOTIFY_TIMEOUT_SECONDS, BATON_NOTIFY_ATTEMPTS and BATON_NOTIFY_BACKOFF_SECONDS."""
        return cls(
            timeout_seconds=max(0.1, settings.baton_notify_timeout_seconds),
            attempts=max(1, min(settings.baton_notify_attempts, 10)),
            backoff_seconds=max(0.0, settings.baton_notify_backoff_seconds),
        )

    @property
    def attempt_deadline(self) -> float:
        """Connect plus read timeout plus a second for apprise's own work."""
        return 2 * self.timeout_seconds + 1.0

    @property
    def total_deadline(self) -> float:
        """The most a whole send may take, every attempt and backoff included."""
        backoff = sum(self.backoff_seconds * float(2**n) for n in range(self.attempts - 1))
        return self.attempts * self.attempt_deadline + backoff + 1.0


@dataclass(frozen=True)
class Outcome:
    """What happened to one send."""

    delivered: bool
    attempts: int
    reason: str | None = None
    seconds: float = 0.0
    #: The destination rule refused the address (nothing was sent; the reason is deliberately vague).
    refused: bool = False


@dataclass(frozen=True)
class _Attempt:
    delivered: bool
    transient: bool
    reason: str | None = None
    refused: bool = False


async def deliver(target: Target, policy: DeliveryPolicy, redactor: Redactor) -> Outcome:
    """Send ``target`` through apprise (the generic webhook through baton's own POST), retrying transient
    failures; never raises for a failed delivery."""
    import apprise

    # memory storage: apprise keeps no state in the user's directories
    asset = apprise.AppriseAsset(storage_mode="memory", secure_logging=True)
    scrub = Redactor(tuple(redactor.sensitive_values) + target.secrets)
    install_log_filter()
    LOG_FILTER.remember(scrub.sensitive_values)
    started = time.monotonic()
    attempt = _Attempt(False, True, "not attempted")
    count = 0
    with anyio.move_on_after(policy.total_deadline) as scope:
        for count in range(1, policy.attempts + 1):
            if target.post is not None:
                attempt = await _post_once(target.post, policy)
            else:
                attempt = await _attempt_once(apprise, asset, target, policy, scrub)
            if attempt.delivered or not attempt.transient or count == policy.attempts:
                break
            await anyio.sleep(policy.backoff_seconds * float(2 ** (count - 1)))
    if scope.cancelled_caught:
        attempt = _Attempt(False, True, f"no delivery within {policy.total_deadline:g} seconds")
    reason = None if attempt.delivered else _clip(scrub.text(attempt.reason or "delivery failed"))
    seconds = round(time.monotonic() - started, 3)
    return Outcome(attempt.delivered, count, reason, seconds, refused=attempt.refused)


async def _post_once(webhook: WebhookPost, policy: DeliveryPolicy) -> _Attempt:
    """One POST of the generic webhook (baton's own client, :mod:`baton.notify.webhook`)."""
    import httpcore

    from baton.notify.webhook import post

    try:
        with anyio.fail_after(policy.attempt_deadline):
            status = await post(webhook, policy.timeout_seconds)
    except DestinationRefusedError:
        return _Attempt(False, False, "the destination was refused", refused=True)
    except (TimeoutError, httpcore.TimeoutException):
        return _Attempt(False, True, f"no answer within {policy.attempt_deadline:g} seconds")
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, OSError) as exc:
        return _Attempt(False, True, f"the connection failed ({type(exc).__name__})")
    if 200 <= status < 300:
        return _Attempt(True, False)
    transient = status in (408, 425, 429) or status >= 500
    return _Attempt(False, transient, f"the endpoint answered HTTP {status}")


async def _attempt_once(
    apprise: Any, asset: Any, target: Target, policy: DeliveryPolicy, scrub: Redactor
) -> _Attempt:
    service = with_timeouts(target.service, policy.timeout_seconds)
    plugin = apprise.Apprise.instantiate(service, asset=asset, suppress_exceptions=True)
    if plugin is None:
        return _Attempt(False, False, f"apprise refused the {target.channel} configuration")
    notifier = apprise.Apprise(asset=asset)
    notifier.add(plugin)
    try:
        result = await notifier.async_notify(
            body=target.body,
            title=target.title,
            body_format=target.body_format,
            timeout=policy.attempt_deadline,
        )
    except Exception as exc:  # apprise turns plugin failures into results; anything else is a bug there
        log.warning("apprise raised %s while sending on %s", type(exc).__name__, target.channel)
        return _Attempt(False, True, f"apprise raised {type(exc).__name__}")
    if result:
        return _Attempt(True, False)
    if result.status == apprise.AppriseResultStatus.TIMEOUT:
        return _Attempt(False, True, f"no answer within {policy.attempt_deadline:g} seconds")
    warnings = [
        scrub.text(entry.message)
        for entry in result.logs()
        if entry.level in ("WARNING", "ERROR", "CRITICAL")
    ]
    reason = "; ".join(dict.fromkeys(warnings)) or "the service refused the notification"
    return _Attempt(False, _is_transient(warnings), reason)


def _is_transient(warnings: list[str]) -> bool:
    """An HTTP 408/429/5xx or a connection failure is worth another attempt; other 4xx are not."""
    statuses = [int(code) for line in warnings for code in STATUS_PATTERN.findall(line)]
    if not statuses:
        return True
    return any(code in (408, 425, 429) or code >= 500 for code in statuses)


def with_timeouts(service: dict[str, Any] | str, seconds: float) -> dict[str, Any] | str:
    """The service with apprise's connect (``cto``) and read (``rto``) timeouts set to ``seconds``."""
    if isinstance(service, dict):
        return {**service, "cto": seconds, "rto": seconds}
    split = urlsplit(service)
    query = "&".join(part for part in (split.query, urlencode({"cto": seconds, "rto": seconds})) if part)
    return urlunsplit(split._replace(query=query))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"
