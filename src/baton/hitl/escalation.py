"""Escalation steps in the store and their firing: each step is a one-shot timer bound to its request.

A request's steps (:mod:`baton.escalation_steps`) become rows of the ``timers`` table with ``request_id`` set,
inserted in the transaction that creates the request, so they survive restarts and the timer scheduler
fires them: its conditional claim takes a step only while the request is still pending and unexpired, so
a step fires once however many servers share the store, and never once the request is decided,
withdrawn or expired. A decision, an expiry or a withdrawal also cancels the request's remaining steps in
its own transaction (:func:`close_in`).

A step only tells people: it never decides anything, and the timeout still denies. Its delivery (or
failure, with the error class) is one receipt, ``hitl_escalated`` or ``hitl_reminded``.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from baton import clock
from baton.errors import BatonError
from baton.escalation_steps import ALL, CHANNELS, PlannedStep
from baton.hitl.announce import without_link
from baton.hitl.records import row_view
from baton.notify.request_text import HEADLINE_CHARS, one_line, request_lines
from baton.runtime import Runtime
from baton.store.schema import hitl_requests, timers
from baton.timers.actions import HITL_STEP_KIND, Outcome
from baton.timers.schedule import format_time

log = logging.getLogger("baton.hitl")

RECEIPT_KINDS = {"escalate": "hitl_escalated", "remind": "hitl_reminded"}
PURPOSES = {"escalate": "hitl_escalation", "remind": "hitl_reminder"}
#: What a chat message may hold (as the announcement trims it).
MAX_CHARS = {"telegram": 4000, "discord": 1900}


def schedule_in(
    connection: Connection,
    runtime: Runtime,
    request_id: str,
    planned: list[PlannedStep],
    created_epoch: float,
) -> list[dict[str, Any]]:
    """Insert one timer per planned step (inside the request's transaction); returns what the
    ``hitl_requested`` receipt records of them."""
    stamp = format_time(datetime.fromtimestamp(created_epoch, UTC))
    recorded: list[dict[str, Any]] = []
    for index, item in enumerate(planned, start=1):
        due = format_time(datetime.fromtimestamp(created_epoch + item.offset_seconds, UTC))
        timer_id = f"tm_{uuid.uuid4().hex[:20]}"
        action = _step_action(request_id, index, len(planned), item)
        connection.execute(
            insert(timers).values(
                id=timer_id,
                name=f"{request_id} {'escalation' if item.step.kind == 'escalate' else 'reminder'} {index}",
                schedule="once",
                action=action,
                status="active",
                first_fire_at=due,
                next_fire_at=due,
                fire_count=0,
                created_at=stamp,
                updated_at=stamp,
                created_by=runtime.instance_id,
                request_id=request_id,
            )
        )
        recorded.append(
            {
                "step": index,
                "kind": item.step.kind,
                "to": item.step.target,
                "source": item.source,
                "due_at": due,
                "timer_id": timer_id,
            }
        )
    return recorded


def _step_action(request_id: str, index: int, steps: int, item: PlannedStep) -> dict[str, Any]:
    """The action a step's timer carries: which request, which of its ``steps`` steps, what to do."""
    return {
        "kind": HITL_STEP_KIND,
        "request_id": request_id,
        "step": index,
        "steps": steps,
        "type": item.step.kind,
        "seconds": item.step.seconds,
        "to": item.step.target,
        "source": item.source,
    }


def close_in(connection: Connection, request_id: str, now: float) -> int:
    """Cancel the request's steps that have not fired (inside the transaction that closes the request)."""
    stamp = format_time(datetime.fromtimestamp(now, UTC))
    return int(
        connection.execute(
            update(timers)
            .where(timers.c.request_id == request_id, timers.c.status == "active")
            .values(status="cancelled", next_fire_at=None, cancelled_at=stamp, updated_at=stamp)
        ).rowcount
    )


def unreachable(runtime: Runtime, targets: list[str]) -> dict[str, str]:
    """Each target a step could not reach now (a channel not ready, a person missing or without a
    destination), with why; for ``baton doctor``."""
    from baton.identity.people import People
    from baton.notify.readiness import readiness

    ready = {r.channel for r in readiness(runtime.settings) if r.ready}
    if not runtime.settings.hitl_admin_email:
        ready.discard("email")  # a step to "email" goes to HITL_ADMIN_EMAIL
    problems: dict[str, str] = {}
    for target in dict.fromkeys(targets):
        if target == ALL and not ready:
            problems[target] = "no channel is configured"
        elif target in CHANNELS and target not in ready:
            problems[target] = "not configured"
        elif target.startswith("person:"):
            try:
                People(runtime).destination(target.partition(":")[2])
            except BatonError as exc:
                problems[target] = exc.error_class
    return problems


def step_text(view: dict[str, Any], action: dict[str, Any], link: str | None, now: float) -> tuple[str, str]:
    """The subject line and plain-text body of a step's notification."""
    kind = "Approval" if view["kind"] == "approval" else "Input"
    message = str(view["message"])
    headline = one_line(message, HEADLINE_CHARS)
    left = max(0, round(view["expires_epoch"] - now))
    waited = max(0, round(now - datetime.fromisoformat(view["created_at"]).timestamp()))
    if action.get("type") == "remind":
        title = f"[baton] Reminder: {kind.lower()} request expires in {left} s: {headline}"
        lead = f"Still undecided after {waited} s; at expiry it is denied (nothing is approved)."
    else:
        title = f"[baton] Escalated: {kind.lower()} request undecided for {waited} s: {headline}"
        lead = f"Nobody has decided this in {waited} s, so it is escalated to you. It expires in {left} s."
    lines = [lead, ""]
    if headline != message:
        lines += [message, ""]
    lines += request_lines(view, link)
    return title, "\n".join(lines)


class Escalation:
    """Fires escalation steps for the timer scheduler (``runtime.services["hitl_steps"]``); never raises."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def fire(self, action: dict[str, Any], firing: dict[str, Any]) -> Outcome:
        """Notify the step's target about its request, if it is still open, and receipt what happened."""
        request_id = str(action.get("request_id"))
        now = clock.time()
        with self.runtime.store.read() as connection:
            row = connection.execute(select(hitl_requests).where(hitl_requests.c.id == request_id)).first()
        view = row_view(row) if row is not None else None
        if view is None or view["status"] != "pending" or view["expires_epoch"] <= now:
            # claimed just before the decision committed: nothing is sent about a closed request
            status = view["status"] if view is not None else "missing"
            return Outcome("succeeded", detail={"request_id": request_id, "sent": False, "status": status})
        link = self._link(view, str(action.get("to")))
        title, text = step_text(view, action, link, now)
        try:
            deliveries = await self._deliver(str(action.get("to")), title, text, view, action, link)
        except Exception as exc:  # a step must never break anything: the failure is its receipt
            log.exception("escalation step of %s failed", request_id)
            deliveries = [_failure(str(action.get("to")), "internal_error", f"{type(exc).__name__}")]
        recorded = [without_link(item, link) for item in deliveries]
        delivered = any(item.get("success") for item in deliveries)
        failure = next((item for item in recorded if not item.get("success")), None)
        error_class = None if delivered or failure is None else str(failure.get("error_class"))
        self._receipt(action, firing, view, recorded, delivered, error_class, link is not None)
        detail = {"request_id": request_id, "sent": True, "delivered": delivered}
        if delivered:
            return Outcome("succeeded", detail=detail)
        return Outcome.failed(
            error_class or "notification_delivery_failed",
            f"The {action.get('type')} step of request {request_id} was not delivered.",
            **detail,
        )

    def _link(self, view: dict[str, Any], target: str) -> str | None:
        """The signed single-use inbox link of ``target`` for this request, when the HTTP server's base URL
        is known: every step to the same target carries the same link until it is spent (one live link per
        person per request, not one per step)."""
        from baton.identity.public_url import link_base

        base = link_base(self.runtime)
        if not base:
            return None
        from baton.identity.links import LinkSigner
        from baton.store.schema import hitl_link_uses

        signer = LinkSigner.for_runtime(self.runtime)
        request_id = view["request_id"]
        with self.runtime.store.read() as connection:
            query = select(hitl_link_uses.c.nonce).where(hitl_link_uses.c.request_id == request_id)
            spent = {row.nonce for row in connection.execute(query)}
        generation = 0
        while (nonce := signer.sign("escalation-link", request_id, target, str(generation))[:22]) in spent:
            generation += 1
        return signer.link(str(base), request_id, view["expires_epoch"], nonce)

    async def _deliver(
        self,
        target: str,
        title: str,
        text: str,
        view: dict[str, Any],
        action: dict[str, Any],
        link: str | None,
    ) -> list[dict[str, Any]]:
        notifier = self.runtime.services.get("notifier")
        if notifier is None:
            return [_failure(target, "notification_not_configured", "No notification service runs here.")]
        purpose = PURPOSES.get(str(action.get("type")), "hitl_escalation")
        payload = {
            "event": purpose,
            "request": {key: view[key] for key in ("request_id", "kind", "message", "agent", "expires_at")},
            "step": {key: action.get(key) for key in ("step", "steps", "type", "to")},
            "link": link,
        }
        options = {"subject": title, "payload": payload, "purpose": purpose}
        if target in CHANNELS:
            return [await self._send(notifier, target, target, title, text, options)]
        if target == ALL:
            ready = [r.channel for r in notifier.channels() if r.ready]
            if "email" in ready and not self.runtime.settings.hitl_admin_email:
                ready.remove("email")
            if not ready:
                return [
                    _failure(ALL, "notification_not_configured", "No notification channel is configured.")
                ]
            return [await self._send(notifier, channel, channel, title, text, options) for channel in ready]
        return [await self._to_person(notifier, target, title, text, options)]

    async def _to_person(
        self, notifier: Any, target: str, title: str, text: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        from baton.identity.people import People

        name = target.partition(":")[2]
        try:
            channel, address = People(self.runtime).destination(name)
        except BatonError:  # no such person and a person without a destination answer alike
            return _failure(target, "notification_not_configured", "This person has no notify destination.")
        addressed = {"email": {"to_email": address}, "telegram": {"chat_id": address}}[channel]
        return await self._send(notifier, target, channel, title, text, {**options, **addressed})

    async def _send(
        self, notifier: Any, target: str, channel: str, title: str, text: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        body = text if channel == "email" else f"{title}\n\n{text}"[: MAX_CHARS.get(channel)]
        try:
            result = await notifier.send(channel, body, **options)
        except Exception as exc:  # the notifier answers failures itself; anything else is a bug there
            log.exception("notifier raised on %s", channel)
            return _failure(target, "notification_delivery_failed", type(exc).__name__, channel=channel)
        if not isinstance(result, dict):
            return _failure(target, "notification_delivery_failed", "no result", channel=channel)
        kept = ("success", "channel", "provider", "recipient", "attempts", "error_class", "error", "missing")
        return {"to": target, **{key: result[key] for key in kept if key in result}}

    def _receipt(
        self,
        action: dict[str, Any],
        firing: dict[str, Any],
        view: dict[str, Any],
        deliveries: list[dict[str, Any]],
        delivered: bool,
        error_class: str | None,
        link_sent: bool,
    ) -> None:
        kind = RECEIPT_KINDS.get(str(action.get("type")), "hitl_escalated")
        payload = {
            "request_id": view["request_id"],
            "agent": view.get("agent"),
            "step": action.get("step"),
            "steps": action.get("steps"),
            "to": action.get("to"),
            "source": action.get("source"),
            "timer_id": firing.get("timer_id"),
            "due_at": firing.get("due_at"),
            "fired_at": firing.get("fired_at"),
            "missed": bool(firing.get("missed")),
            "fired_by": self.runtime.instance_id,
            "expires_at": view["expires_at"],
            "delivered": delivered,
            "error_class": error_class,
            "link_sent": link_sent,
            "deliveries": deliveries,
        }
        try:
            self.runtime.receipts.append(kind, payload)
        except BatonError:
            log.exception("%s receipt refused", kind)


def _failure(target: str, error_class: str, error: str, **details: Any) -> dict[str, Any]:
    return {"to": target, "success": False, "error_class": error_class, "error": error, **details}
