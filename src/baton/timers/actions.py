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


#: The action of a request's escalation step (set by the human-in-the-loop broker, never by a tool).
HITL_STEP_KIND = "hitl_step"
#: The service that fires escalation steps (:class:`baton.hitl.escalation.Escalation`).
HITL_STEPS_SERVICE = "hitl_steps"


async def run_action(
    runtime: Runtime,
    raw_action: dict[str, Any],
    agent: str | None = None,
    firing: dict[str, Any] | None = None,
) -> Outcome:
    """Run one action as ``agent`` (the one that set the timer); every failure becomes a failed outcome
    (only cancellation propagates). ``firing`` (timer_id, due_at, fired_at, missed) goes to a step."""
    try:
        if isinstance(raw_action, dict) and raw_action.get("kind") == HITL_STEP_KIND:
            return await _hitl_step(runtime, raw_action, firing or {})
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


async def _hitl_step(runtime: Runtime, action: dict[str, Any], firing: dict[str, Any]) -> Outcome:
    steps = runtime.services.get(HITL_STEPS_SERVICE)
    if steps is None:
        return Outcome.failed("internal_error", "The escalation service is not running in this server.")
    outcome: Outcome = await steps.fire(action, firing)
    return outcome


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
