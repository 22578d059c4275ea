"""Waiting for a request's decision, with progress notifications and the elicitation offered beside it.

The asking tools wait here once the request exists, as do ``mcp_wait_for_request`` and a gateway call
awaiting approval (:mod:`baton.gateway.serving.call_approval`); what wakes a waiting call is
:mod:`baton.hitl.waiters`. Inside an MCP task the elicitation goes to the task's ``inputRequests``; in the
2026-07-28 era the first leg answers ``InputRequiredResult`` and the client's retry waits
(:mod:`baton.hitl.mrtr`). Either way the result is the request's :func:`outcome`: an expired request
raises ``hitl_timeout`` and approves nothing.
"""

from __future__ import annotations

from typing import Any

from baton import clock
from baton.boundary.toolkit import CallContext
from baton.errors import HitlError
from baton.hitl.broker import HitlBroker
from baton.hitl.reach import (
    client_paths,
    operator_paths,
    record,
    refuses_unreached,
    unreached,
    waiting_message,
)
from baton.hitl.records import NewRequest

#: ``notifications/message`` levels, least severe first (RFC 5424 as MCP names them).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def outcome(view: dict[str, Any]) -> dict[str, Any]:
    """A request's view as the result of a waiting call (approval or input shape); raises on no decision."""
    common = {
        "request_id": view["request_id"],
        "kind": view["kind"],
        "status": view["status"],
        "admin_notes": view["admin_notes"],
        "responded_at": view["responded_at"],
        "waited_seconds": _waited(view),
        "reached_via": view.get("reached_via", []),
    }
    if view["kind"] == "approval":
        common["approved"] = view["approved"] is True
    else:
        common["response"] = view["response"]
    if view["status"] == "expired":
        details = {**common, "timeout": True, "decision": "timeout"}
        message = f"Nobody decided request {view['request_id']} before it expired; nothing was approved."
        raise HitlError("hitl_timeout", message, **details)
    if view["status"] == "pending":
        details = {**common, "timeout": False, "decision": None, "expires_at": view["expires_at"]}
        message = f"Request {view['request_id']} is still pending; call mcp_wait_for_request to keep waiting."
        raise HitlError("hitl_still_pending", message, **details)
    result = {**common, "success": True, "timeout": False, "decision": view["status"]}
    result.update(decided_by=view.get("decided_by"), decided_via=view.get("decided_via"))
    if view["kind"] == "input":
        result["declined"] = view["status"] == "rejected"
    return result


def _waited(view: dict[str, Any]) -> float:
    """Seconds from the request's creation to its decision (or to now, while undecided)."""
    from datetime import datetime

    end = datetime.fromisoformat(view["responded_at"]).timestamp() if view["responded_at"] else clock.time()
    return round(max(0.0, end - datetime.fromisoformat(view["created_at"]).timestamp()), 3)


async def wait_for_outcome(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, window: float | None, started: float
) -> dict[str, Any]:
    """Wait on a request with progress notifications (and the optional elicitation channel)."""
    import anyio

    from baton.hitl.elicit import (
        announce_completion,
        elicit_decision,
        elicitation_mode,
        elicitation_wanted,
        may_elicit,
    )
    from baton.telemetry.tracing import span

    settings = broker.runtime.settings
    if ctx.task is not None:  # an MCP task (approval, input, wait, or a gateway call awaiting approval)
        ctx.task.waiting_for(view["request_id"])
    total = view["expires_epoch"] - started
    message = waiting_message(broker.runtime, view)

    async def tick(waited: float, window_total: float) -> None:
        """One progress notification: seconds waited of the window's total."""
        await ctx.progress(round(waited, 1), round(window_total, 1), message)

    await ctx.progress(0.0, round(total if window is None else min(window, total), 1), message)
    await tell_client(ctx, message)
    elicited: list[str] = []
    async with anyio.create_task_group() as group:
        if elicitation_wanted(settings, ctx) and may_elicit(view, ctx, elicitation_mode(settings, ctx)):
            group.start_soon(elicit_decision, broker, view, ctx, elicited)
        with span(
            "hitl.wait", {"baton.hitl.request_id": view["request_id"], "baton.hitl.kind": view["kind"]}
        ) as s:
            final = await broker.wait(
                view["request_id"],
                window_seconds=window,
                tick=tick,
                tick_seconds=settings.baton_hitl_progress_seconds,
            )
            s.set_attribute("baton.hitl.status", str(final.get("status")))
        group.cancel_scope.cancel()
    await announce_completion(ctx, elicited, str(final.get("status")))
    return outcome(final)


async def ask_and_wait(broker: HitlBroker, new: NewRequest, ctx: CallContext) -> dict[str, Any]:
    """Create a request and wait for its decision; in the 2026-07-28 era, elicit first by MRTR.

    The first leg creates the request and, when elicitation applies, answers ``InputRequiredResult``; the
    client's retry (same tool, same arguments, the sealed ``requestState``) records the answer and waits.
    """
    from baton.hitl.elicit import elicit_request, elicitation_mode, may_elicit
    from baton.hitl.mrtr import modern_era

    started = clock.time()
    if ctx.request_state is not None:
        return await resume_round(broker, ctx, started)
    view = await broker.create(new)
    if ctx.task is not None:
        return await wait_as_task(broker, view, ctx, started)
    mode = elicitation_mode(broker.runtime.settings, ctx) if modern_era(ctx.protocol_version) else None
    if not may_elicit(view, ctx, mode):
        mode = None
    elicit = elicit_request(broker, view, mode) if mode is not None else None
    view = reached(broker, view, ctx, mode if elicit is not None else classic_elicitation(broker, view, ctx))
    if mode is not None and elicit is not None:
        import mcp_types as types

        from baton.hitl.mrtr import INPUT_KEY, STATE_TTL_SECONDS, new_state

        state = new_state(view["request_id"], mode)
        until = min(view["expires_epoch"], clock.time() + STATE_TTL_SECONDS)
        broker.waiters.open_round(view["request_id"], state.nonce, until)
        interim = types.InputRequiredResult(input_requests={INPUT_KEY: elicit}, request_state=state.encode())
        return {
            "success": True,
            "request_id": view["request_id"],
            "input_required": mode,
            "reached_via": view["reached_via"],
            "mcp_input_required": interim.model_dump(by_alias=True, exclude_none=True, mode="json"),
        }
    return await wait_for_outcome(broker, view, ctx, None, started)


async def wait_as_task(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, started: float
) -> dict[str, Any]:
    """Wait in an MCP task: the elicitation goes to the task's ``inputRequests``, answered by tasks/update.

    A URL elicitation is always offered when it applies; a form only to a caller with decision authority,
    since its answer comes back over an MCP method (see :mod:`baton.hitl.tasks_input`).
    """
    from baton.hitl.elicit import elicit_request, elicitation_mode, may_elicit
    from baton.hitl.mrtr import INPUT_KEY

    mode = elicitation_mode(broker.runtime.settings, ctx)
    if (mode == "form" and ctx.decider is None) or not may_elicit(view, ctx, mode):
        mode = None
    elicit = elicit_request(broker, view, mode) if mode is not None else None
    view = reached(broker, view, ctx, mode if elicit is not None else None)
    if elicit is not None:
        key = f"{INPUT_KEY}-{view['request_id']}"
        ctx.task.needs_input({key: elicit.model_dump(by_alias=True, exclude_none=True, mode="json")})
    return await wait_for_outcome(broker, view, ctx, None, started)


async def resume_round(broker: HitlBroker, ctx: CallContext, started: float) -> dict[str, Any]:
    """The retry of an MRTR round: spend the state, record an accepted form answer, then wait as usual."""
    from baton.hitl.elicit import may_elicit, record_answer
    from baton.hitl.mrtr import INPUT_KEY, consume_state

    assert ctx.request_state is not None
    state = consume_state(broker.runtime, ctx.request_state)
    view = broker.get(state.request_id, ctx.agent.read_scope)
    slot = broker.waiters.enter(state.request_id)  # this retry is the waiting call: not waiter_gone
    try:
        answer = (ctx.input_responses or {}).get(INPUT_KEY)
        if (
            answer is not None
            and state.mode == "form"
            and view["status"] == "pending"
            and may_elicit(view, ctx, state.mode)
        ):
            record_answer(broker, view, str(getattr(answer, "action", "")), getattr(answer, "content", None))
            view = broker.get(state.request_id)
        return await wait_for_outcome(broker, view, ctx, None, started)
    finally:
        broker.waiters.leave(state.request_id, slot)


def classic_elicitation(broker: HitlBroker, view: dict[str, Any], ctx: CallContext) -> str | None:
    """The back-channel elicitation :func:`wait_for_outcome` will open for this call (2025-11-25 era)."""
    from baton.hitl.elicit import elicitation_mode, elicitation_wanted, may_elicit

    settings = broker.runtime.settings
    mode = elicitation_mode(settings, ctx)
    return mode if elicitation_wanted(settings, ctx) and may_elicit(view, ctx, mode) else None


def reached(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, elicited: str | None, resumable: bool = True
) -> dict[str, Any]:
    """Record the paths a new request went out on; one that reached nobody fails the call at once, unless
    the operator chose to wait anyway: an agent's question stays pending for a person at the host, a
    gateway call's request (``resumable`` false) is withdrawn, since its call is not made. A subagent's
    call waits as ever: its agent sees ``waiting_for_approval`` and the request id in the subagent's status."""
    runtime = broker.runtime
    paths = client_paths(ctx, elicited, card=ctx.apps_card and resumable) + operator_paths(runtime)
    paths = record(runtime, view["request_id"], paths)
    if not paths and refuses_unreached(runtime) and ctx.on_behalf is None:
        if not resumable:
            broker.withdraw(view["request_id"], "it reached nobody")
        raise unreached(runtime, view, resumable)
    return {**view, "reached_via": paths}


async def tell_client(ctx: CallContext, message: str) -> None:
    """The where-to-decide line as a ``notice`` log notification on the call's stream, unless the session
    asked for fewer; a client gone away never fails the wait."""
    import warnings

    session = ctx.session
    wanted = getattr(session, "baton_log_level", "info") if session is not None else None
    if wanted not in LOG_LEVELS or LOG_LEVELS.index(wanted) > LOG_LEVELS.index("notice"):
        return
    try:
        with warnings.catch_warnings():  # the logging capability is deprecated in 2026-07-28, still served
            warnings.simplefilter("ignore")
            await session.send_log_message(
                "notice", message, logger="baton.hitl", related_request_id="hitl-wait"
            )
    except Exception:  # a client gone away must not fail the wait
        return
