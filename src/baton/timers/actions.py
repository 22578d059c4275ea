"""What a firing does: notify through the notifier service, spawn an async subagent, or only record."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.errors import BatonError
from baton.runtime import Runtime
from baton.timers.schedule import NotifyAction, SpawnSubagentAction, parse_action

log = logging.getLogger("baton.timers")


@dataclass(frozen=True)
class Outcome:
    """The result of one firing's action, as its receipt records it."""

    outcome: Literal["succeeded", "failed"]
    error_class: str | None = None
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, error_class: str, error: str, **detail: Any) -> Outcome:
        """A failed action with its error class."""
        return cls("failed", error_class, error, detail)


async def run_action(runtime: Runtime, raw_action: dict[str, Any], agent: str | None = None) -> Outcome:
    """Run one action as ``agent`` (the one that set the timer); every failure becomes a failed outcome
    (only cancellation propagates)."""
    try:
        action = parse_action(raw_action)
        if isinstance(action, NotifyAction):
            return await _notify(runtime, action)
        if isinstance(action, SpawnSubagentAction):
            return await _spawn(runtime, action, agent)
        return Outcome("succeeded")
    except BatonError as exc:
        return Outcome.failed(exc.error_class, exc.message, **_pick(exc.details, "reason", "limit"))
    except Exception:
        log.exception("timer action failed")
        return Outcome.failed("internal_error", "The timer's action failed unexpectedly; see the server log.")


async def _notify(runtime: Runtime, action: NotifyAction) -> Outcome:
    notifier = runtime.services.get("notifier")
    if notifier is None:
        return Outcome.failed(
            "notification_not_configured",
            "No notification service runs in this server; nothing was sent.",
            channel=action.channel,
        )
    try:
        result = await notifier.send(action.channel, action.message)
    except BatonError as exc:
        return Outcome.failed(exc.error_class, exc.message, channel=action.channel)
    except Exception:
        log.exception("notifier raised")
        return Outcome.failed(
            "notification_delivery_failed", "The notifier failed unexpectedly.", channel=action.channel
        )
    if not isinstance(result, dict) or not result.get("success"):
        result = result if isinstance(result, dict) else {}
        detail = {"channel": action.channel, **_pick(result, "provider", "missing")}
        return Outcome.failed(
            str(result.get("error_class") or "notification_delivery_failed"),
            str(result.get("error") or "The notification was not delivered."),
            **detail,
        )
    return Outcome("succeeded", detail={"channel": action.channel, **_pick(result, "channel", "provider")})


async def _spawn(runtime: Runtime, action: SpawnSubagentAction, agent: str | None) -> Outcome:
    from baton.subagents.runner import SpawnRequest
    from baton.timers.caps import SpawnRate

    runner = runtime.services.get("subagents")
    if runner is None:
        return Outcome.failed("internal_error", "The subagent service is not running in this server.")
    SpawnRate.for_runtime(runtime).take()
    request = SpawnRequest(task=action.task, role=action.role, mode="async", agent=agent)
    result = await runner.spawn(request)
    if not result.get("success"):
        return Outcome.failed(
            str(result.get("error_class") or "internal_error"),
            str(result.get("error") or "The subagent could not be spawned."),
        )
    return Outcome("succeeded", detail=_pick(result, "subagent_id", "status", "role"))


def _pick(source: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: source[key] for key in keys if source.get(key) is not None}
