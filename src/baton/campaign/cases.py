"""The campaign's cases: what it calls, in order, and what the gates (:mod:`baton.campaign.gates`) need
beyond the recorded rows."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from baton.campaign.gates import CANARY
from baton.campaign.governed import ECHO, TRANSFER, governed_case
from baton.campaign.options import CASE_GUARD_SECONDS, POLL_SECONDS
from baton.campaign.run_view import Campaign

PARENT_CONTEXT = {
    "customer": "Ada",
    "request": "Refund an item bought 3 days ago for SGD 80",
    "policy": "Refunds within 7 days and below SGD 100 may be approved",
    "irrelevant_history": ["weather chat", "shipping FAQ", "newsletter"],
    "private_note": CANARY,
}


CASES = [
    "minimal_sync",
    "llm_generated_sync",
    "multi_turn_message",
    "async_spawn",
    "async_status_N",
    "cancel_spawn",
    "cancel_subagent",
    "cancelled_status",
    "hitl_approval",
    "hitl_pending",
    "hitl_operator_response|hitl_human_response",
    "hitl_timeout",
    "email_notification_preflight",
    "im_notification_preflight",
    "slack_notification_preflight",
    "timer_set_cancel",
    "timer_cancel",
    "timer_set",
    "timer_list",
    "adapters_list",
    "governed_subagent_spawn",
    "governed_status_N",
    "governed_operator_approval",
    "governed_final_N",
]
TASK = "Decide whether the refund meets the supplied policy and explain."
APPROVAL_MESSAGE = "Approve publishing this baton validation campaign's result?"
APPROVAL_CONTEXT = {
    "risk": "low",
    "artifact": "validation-only",
    "consequence": "An approval authorizes publishing this run; a rejection keeps it local.",
}


async def run_cases(campaign: Campaign) -> dict[str, Any]:
    """Every case in order; returns what the gates need beyond the recorded rows."""
    outcome: dict[str, Any] = {}
    outcome.update(await _subagent_cases(campaign))
    if outcome.get("stopped"):
        return outcome
    outcome.update(await _hitl_cases(campaign))
    outcome.update(await _notification_cases(campaign))
    if {"mcp_set_timer", "mcp_list_timers", "mcp_cancel_timer"} <= campaign.tool_names:
        outcome.update(await _timer_cases(campaign))
    if "mcp_list_adapters" in campaign.tool_names:
        outcome["adapters"] = await campaign.call("adapters_list", "mcp_list_adapters", {})
    if ECHO in campaign.tool_names and TRANSFER in campaign.tool_names:
        outcome.update(await governed_case(campaign))
    return outcome


async def _subagent_cases(c: Campaign) -> dict[str, Any]:
    minimal = await c.call(
        "minimal_sync",
        "mcp_spawn_subagent",
        {
            "task": TASK,
            "context_strategy": "minimal",
            "mode": "sync",
            "parent_context": PARENT_CONTEXT,
            "role": "refund policy specialist",
            "minimal_slice": ["policy"],
        },
    )
    if str(minimal.get("error_class", "")).startswith("provider_"):
        # the provider failed the first call: every later case would fail the same way
        return {
            "stopped": {
                "case": "minimal_sync",
                "error_class": minimal["error_class"],
                "error": str(minimal.get("error", "")),
            }
        }
    await c.call(
        "llm_generated_sync",
        "mcp_spawn_subagent",
        {
            "task": TASK,
            "context_strategy": "llm_generated",
            "mode": "sync",
            "parent_context": PARENT_CONTEXT,
            "role": "refund policy specialist",
            "business_rules": "Keep customer, request, and policy. Exclude private_note and irrelevant history.",
        },
    )
    await c.call(
        "multi_turn_message",
        "mcp_send_message_to_subagent",
        {
            "subagent_id": minimal.get("subagent_id"),
            "message": "Additional fact: the item is unused. Re-evaluate using only supplied facts.",
        },
    )
    spawned = await c.call(
        "async_spawn",
        "mcp_spawn_subagent",
        {
            "task": "Return a JSON summary of the number 17 and whether it is prime.",
            "context_strategy": "minimal",
            "mode": "async",
            "role": "math specialist",
        },
    )
    async_status: dict[str, Any] | None = None
    deadline = time.monotonic() + CASE_GUARD_SECONDS
    attempt = 0
    while spawned.get("subagent_id"):
        attempt += 1
        async_status = await c.call(
            f"async_status_{attempt}",
            "mcp_get_subagent_status",
            {"subagent_id": spawned.get("subagent_id")},
        )
        if async_status.get("status") in {"completed", "failed"} or time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_SECONDS)
    slow = await c.call(
        "cancel_spawn",
        "mcp_spawn_subagent",
        {
            "task": "Write a detailed taxonomy with one thousand entries.",
            "context_strategy": "minimal",
            "mode": "async",
            "role": "taxonomy specialist",
        },
    )
    await c.call("cancel_subagent", "mcp_cancel_subagent", {"subagent_id": slow.get("subagent_id")})
    await c.call("cancelled_status", "mcp_get_subagent_status", {"subagent_id": slow.get("subagent_id")})
    return {"async_status": async_status}


async def _hitl_cases(c: Campaign) -> dict[str, Any]:
    interactive = c.options.interactive_human
    deadline = time.monotonic() + c.options.human_timeout_seconds if interactive else None
    approval_task = asyncio.create_task(
        c.call(
            "hitl_approval",
            "mcp_request_admin_approval",
            {
                "request_message": APPROVAL_MESSAGE,
                "context": APPROVAL_CONTEXT,
                # the operator decides at once when not interactive: the window is only a hang guard
                "timeout_seconds": c.options.human_timeout_seconds
                if interactive
                else int(CASE_GUARD_SECONDS),
                "urgent": False,
            },
        )
    )
    waited = time.monotonic() + CASE_GUARD_SECONDS
    while True:  # the request is listed once the server has created it, however long that took
        pending = await c.call("hitl_pending", "mcp_list_pending_requests", {})
        rows = pending.get("requests") or []
        if rows or approval_task.done() or time.monotonic() > waited:
            break
        await asyncio.sleep(POLL_SECONDS)
    request_id = rows[0].get("request_id") if rows else None
    human_decision = None
    if request_id and interactive:
        assert deadline is not None
        try:
            human_decision = await c.human_decision(request_id, APPROVAL_MESSAGE, APPROVAL_CONTEXT, deadline)
        except BaseException:
            approval_task.cancel()
            await asyncio.gather(approval_task, return_exceptions=True)
            raise
        await c.call(
            "hitl_human_response",
            "mcp_respond_to_request",
            {
                "request_id": request_id,
                "approved": human_decision["approved"],
                "admin_notes": human_decision["admin_notes"],
            },
        )
    elif request_id:
        await c.call(
            "hitl_operator_response",
            "mcp_respond_to_request",
            {
                "request_id": request_id,
                "approved": True,
                "admin_notes": "Approved by the automated validation operator; not a claimed human judgment.",
            },
        )
    approval = await approval_task
    if human_decision is not None:
        c.bundle.write_json("human_decision.json", {**human_decision, "mcp_result": approval})
    timeout = await c.call(
        "hitl_timeout",
        "mcp_request_admin_approval",
        {
            "request_message": "No operator will answer this timeout probe.",
            "context": {"probe": True},
            "timeout_seconds": 1,
            "urgent": False,
        },
    )
    return {
        "request_id": request_id,
        "approval": approval,
        "timeout": timeout,
        "human_decision": human_decision,
    }


async def _notification_cases(c: Campaign) -> dict[str, Any]:
    real = c.options.real_notifications
    text = "Real baton campaign notification" if real else "baton campaign credential preflight"
    email = await c.call(
        "email_notification_preflight",
        "mcp_send_email",
        {
            "to_email": c.env.get("HITL_ADMIN_EMAIL") if real else "nobody@example.invalid",
            "subject": "baton validation campaign",
            "body": text,
        },
    )
    telegram_arguments: dict[str, Any] = {"message": text, "parse_mode": "HTML"}
    if not real:
        telegram_arguments["chat_id"] = "0"
    telegram = await c.call("im_notification_preflight", "mcp_send_telegram_message", telegram_arguments)
    slack = await c.call("slack_notification_preflight", "mcp_send_slack_message", {"message": text})
    return {"email": email, "telegram": telegram, "slack": slack}


#: Delays tried for the timer the campaign cancels before its time: a cancel that came too late (the
#: one-shot timer already fired: ``timer_already_completed``) is tried again with twice the headroom, so
#: no outcome depends on how fast this machine is.
DOOMED_DELAYS_SECONDS = (1, 2, 4, 8, 16, 32, 64, 128)


async def _timer_cases(c: Campaign) -> dict[str, Any]:
    """Set a timer and cancel it before its time, then set one due after it and wait for that one to fire.

    Timers fire in due order, so once the second has fired the first one's due time has passed: a
    cancelled timer that was going to fire would have fired by then (the gate reads the receipts).
    """
    record = {"kind": "record"}
    doomed: dict[str, Any] = {}
    cancelled: dict[str, Any] = {}
    delay = DOOMED_DELAYS_SECONDS[0]
    for delay in DOOMED_DELAYS_SECONDS:
        doomed = await c.call(
            "timer_set_cancel",
            "mcp_set_timer",
            {"name": "campaign-cancel", "delay_seconds": delay, "action": record},
        )
        cancelled = await c.call("timer_cancel", "mcp_cancel_timer", {"timer_id": doomed.get("timer_id")})
        if cancelled.get("error_class") != "timer_already_completed":
            break  # cancelled before its time, or refused otherwise (the gate shows which)
    fired = await c.call(
        "timer_set",
        "mcp_set_timer",
        {"name": "campaign-record", "delay_seconds": delay + 1, "action": record},
    )
    listed: dict[str, Any] = {}
    deadline = time.monotonic() + CASE_GUARD_SECONDS
    attempt = 0
    while True:
        attempt += 1
        listed = await c.call(f"timer_list_{attempt}", "mcp_list_timers", {})
        timer = _find_timer(listed, fired.get("timer_id")) or {}
        if timer.get("fire_count") and (timer.get("last_firing") or {}).get("outcome") not in (
            None,
            "running",
        ):
            break
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_SECONDS)
    return {
        "timer_set": fired,
        "timer_listed": _find_timer(listed, fired.get("timer_id")),
        "timer_doomed": doomed,
        "timer_doomed_listed": _find_timer(listed, doomed.get("timer_id")),
        "timer_cancelled": cancelled,
    }


def _find_timer(listed: dict[str, Any], timer_id: Any) -> dict[str, Any] | None:
    return next((t for t in listed.get("timers") or [] if t.get("timer_id") == timer_id), None)
