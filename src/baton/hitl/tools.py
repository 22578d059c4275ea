"""The human-in-the-loop tools of SPEC.md section 3 (the only module here that knows about MCP)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt

from baton.errors import HitlError
from baton.hitl.broker import HitlBroker, get_broker
from baton.hitl.records import MAX_TEXT, MAX_TIMEOUT_SECONDS, Decision, NewRequest, public_view
from baton.hitl.steps import MAX_TEXT as STEPS_MAX_TEXT
from baton.limits import LIST_CONTEXT_BYTES, fits
from baton.toolkit import CallContext, ToolArgs, ToolRegistry

#: Pending requests per page of ``mcp_list_pending_requests``: the default and the most one call may ask.
DEFAULT_PAGE = 100
MAX_PAGE = 500

TimeoutField = Field(
    None,
    ge=1,
    le=MAX_TIMEOUT_SECONDS,
    description="Seconds until the request expires (default HITL_TIMEOUT_SECONDS).",
)

EscalationField = Field(
    "",
    max_length=STEPS_MAX_TEXT,
    description='Steps while undecided, e.g. "600:slack,900:person:ada,remind:60" (docs/hitl.md).',
)


class ApprovalArgs(ToolArgs):
    """Arguments of ``mcp_request_admin_approval``."""

    request_message: str = Field(
        min_length=1, max_length=MAX_TEXT, description="What to approve, in one sentence or more."
    )
    context: dict[str, Any] | None = Field(
        None, description="Facts the human needs to decide (a JSON object)."
    )
    timeout_seconds: int | None = TimeoutField
    urgent: StrictBool = Field(False, description="Listed first and flagged in notifications.")
    required_approvals: StrictInt | None = Field(
        None,
        ge=1,
        description="How many distinct people must approve (default 1; at most "
        "BATON_HITL_MAX_REQUIRED_APPROVALS). One rejection rejects.",
    )
    step_up: StrictBool = Field(
        False,
        description="Approving needs a fresh passkey confirmation bound to this request and its context.",
    )
    escalation: str = EscalationField


class InputArgs(ToolArgs):
    """Arguments of ``mcp_request_admin_input``."""

    question: str = Field(min_length=1, max_length=MAX_TEXT, description="The question for the human.")
    context: dict[str, Any] | None = Field(
        None, description="Facts the human needs to answer (a JSON object)."
    )
    timeout_seconds: int | None = TimeoutField
    urgent: StrictBool = Field(False, description="Listed first and flagged in notifications.")
    options: list[Annotated[str, Field(min_length=1, max_length=1000)]] | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="When given, the answer must be one of these (at most 100).",
    )
    escalation: str = EscalationField


class NoArgs(ToolArgs):
    """No arguments."""


class ListPendingArgs(ToolArgs):
    """Arguments of ``mcp_list_pending_requests``."""

    limit: StrictInt = Field(
        DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Requests per page (default {DEFAULT_PAGE})."
    )
    cursor: str | None = Field(
        None, max_length=512, description="next_cursor of the previous page; omit for the first page."
    )


class RespondArgs(ToolArgs):
    """Arguments of ``mcp_respond_to_request``."""

    request_id: str = Field(min_length=1, max_length=40, description="The request to decide.")
    approved: StrictBool | None = Field(None, description="Approvals: true approves, false rejects.")
    response: str | None = Field(None, max_length=MAX_TEXT, description="Input requests: the answer.")
    admin_notes: str | None = Field(None, max_length=MAX_TEXT, description="Notes returned to the agent.")


class RequestIdArgs(ToolArgs):
    """Arguments naming one request."""

    request_id: str = Field(
        min_length=1, max_length=40, description="The request id (hr_…) the asking call returned."
    )


class WaitArgs(RequestIdArgs):
    """Arguments of ``mcp_wait_for_request``."""

    timeout_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="Seconds to wait this time; default: until the request expires.",
    )


def outcome(view: dict[str, Any]) -> dict[str, Any]:
    """A request's view as the result of a waiting call (approval or input shape); raises on no decision."""
    common = {
        "request_id": view["request_id"],
        "kind": view["kind"],
        "status": view["status"],
        "admin_notes": view["admin_notes"],
        "responded_at": view["responded_at"],
        "waited_seconds": _waited(view),
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

    end = datetime.fromisoformat(view["responded_at"]).timestamp() if view["responded_at"] else time.time()
    return round(max(0.0, end - datetime.fromisoformat(view["created_at"]).timestamp()), 3)


def status_view(view: dict[str, Any]) -> dict[str, Any]:
    """The full state of a request as ``mcp_get_request_status`` reports it."""
    # provenance is what the person deciding is shown (baton.hitl.present); the agent knows who it is
    shown = {key: value for key, value in view.items() if key not in ("expires_epoch", "provenance")}
    return {
        **shown,
        "decided": view["status"] in ("approved", "rejected", "answered"),
        "timeout": view["status"] == "expired",
    }


async def wait_for_outcome(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, window: float | None, started: float
) -> dict[str, Any]:
    """Wait on a request with progress notifications (and the optional elicitation channel)."""
    import anyio

    from baton.hitl.elicit import announce_completion, elicit_decision, elicitation_wanted
    from baton.tracing import span

    settings = broker.runtime.settings
    if ctx.task is not None:  # an MCP task (approval, input, wait, or a gateway call awaiting approval)
        ctx.task.waiting_for(view["request_id"])
    total = view["expires_epoch"] - started
    message = f"Waiting for a human decision on {view['request_id']}"

    async def tick(waited: float, window_total: float) -> None:
        """One progress notification: seconds waited of the window's total."""
        await ctx.progress(round(waited, 1), round(window_total, 1), message)

    await ctx.progress(0.0, round(total if window is None else min(window, total), 1), message)
    elicited: list[str] = []
    async with anyio.create_task_group() as group:
        if elicitation_wanted(settings, ctx) and may_elicit(view, ctx):
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
    from baton.hitl.elicit import elicit_request, elicitation_mode
    from baton.hitl.mrtr import modern_era

    started = time.time()
    if ctx.request_state is not None:
        return await resume_round(broker, ctx, started)
    view = await broker.create(new)
    if ctx.task is not None:
        return await wait_as_task(broker, view, ctx, started)
    mode = elicitation_mode(broker.runtime.settings, ctx) if modern_era(ctx.protocol_version) else None
    if not may_elicit(view, ctx):
        mode = None
    elicit = elicit_request(broker, view, mode) if mode is not None else None
    if mode is not None and elicit is not None:
        import mcp_types as types

        from baton.hitl.mrtr import INPUT_KEY, STATE_TTL_SECONDS, new_state

        state = new_state(view["request_id"], mode)
        until = min(view["expires_epoch"], time.time() + STATE_TTL_SECONDS)
        broker.waiters.open_round(view["request_id"], state.nonce, until)
        interim = types.InputRequiredResult(input_requests={INPUT_KEY: elicit}, request_state=state.encode())
        return {
            "success": True,
            "request_id": view["request_id"],
            "input_required": mode,
            "mcp_input_required": interim.model_dump(by_alias=True, exclude_none=True, mode="json"),
        }
    return await wait_for_outcome(broker, view, ctx, None, started)


async def wait_as_task(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, started: float
) -> dict[str, Any]:
    """Wait inside an MCP task: the elicitation goes to the task's ``inputRequests``, answered by tasks/update.

    A URL elicitation is always offered when it applies; a form only to a caller with decision authority,
    since its answer comes back over an MCP method (see :mod:`baton.hitl.tasks_input`).
    """
    from baton.hitl.elicit import elicit_request, elicitation_mode
    from baton.hitl.mrtr import INPUT_KEY

    mode = elicitation_mode(broker.runtime.settings, ctx)
    if (mode == "form" and ctx.decider is None) or not may_elicit(view, ctx):
        mode = None
    elicit = elicit_request(broker, view, mode) if mode is not None else None
    if elicit is not None:
        key = f"{INPUT_KEY}-{view['request_id']}"
        ctx.task.needs_input({key: elicit.model_dump(by_alias=True, exclude_none=True, mode="json")})
    return await wait_for_outcome(broker, view, ctx, None, started)


async def resume_round(broker: HitlBroker, ctx: CallContext, started: float) -> dict[str, Any]:
    """The retry of an MRTR round: spend the state, record an accepted form answer, then wait as usual."""
    from baton.hitl.elicit import record_answer
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
            and may_elicit(view, ctx)
        ):
            record_answer(broker, view, str(getattr(answer, "action", "")), getattr(answer, "content", None))
            view = broker.get(state.request_id)
        return await wait_for_outcome(broker, view, ctx, None, started)
    finally:
        broker.waiters.leave(state.request_id, slot)


def may_elicit(view: dict[str, Any], ctx: CallContext) -> bool:
    """Whether this caller's client may be asked (and its form answer count) for this request.

    Only for the agent's own request, and never for one that needs a quorum or a step-up: a client's
    answer is the client's word, not a person's proof.
    """
    if not ctx.agent.owns(view.get("agent")):
        return False
    return int(view.get("required_approvals") or 1) <= 1 and not view.get("step_up")


def listed(row: dict[str, Any]) -> dict[str, Any]:
    """A pending request as listed: a large context is left out and flagged, so a list stays small."""
    truncated = row.get("context") is not None and not fits(row["context"], LIST_CONTEXT_BYTES)
    return {**row, "context": None if truncated else row.get("context"), "context_truncated": truncated}


def where_people_decide(runtime: Any, request_id: str) -> str:
    """Where a person decides a request: its inbox page when the HTTP server runs, else the CLI."""
    base = runtime.settings.baton_public_url or runtime.services.get("http_base_url")
    if base:
        return f"in the baton inbox at {str(base).rstrip('/')}/inbox/requests/{request_id}"
    return f"with `baton hitl approve|reject|answer {request_id}` on the server's host"


def not_authorized(runtime: Any, request_id: str) -> HitlError:
    """The refusal an MCP caller without decision authority gets; it names where a person decides, and
    no setting (an agent that can edit its configuration must not read a way around the rule)."""
    return HitlError(
        "hitl_decider_not_authorized",
        f"An agent does not decide request {request_id}: a person does, "
        f"{where_people_decide(runtime, request_id)}. The request is still pending; wait for it with "
        "mcp_wait_for_request.",
        request_id=request_id,
    )


def asked_from(ctx: CallContext) -> dict[str, Any] | None:
    """What the server knows of where a request comes from: the MCP client, and the subagent that asked."""
    found: dict[str, Any] = {}
    if ctx.client:
        found["client"] = ctx.client
    if ctx.on_behalf is not None:
        found["subagent_id"] = ctx.on_behalf.subagent_id
        found["parent_agent"] = ctx.on_behalf.parent_agent
    return found or None


def register(registry: ToolRegistry) -> None:
    """Add the human-in-the-loop tools to the registry."""
    broker = get_broker(registry.runtime)
    _register_asking(registry, broker)
    _register_deciding(registry, broker)


def _register_asking(registry: ToolRegistry, broker: HitlBroker) -> None:
    """The tools an agent uses to ask and to wait."""

    @registry.tool("mcp_request_admin_approval", ApprovalArgs)
    async def request_approval(args: ApprovalArgs, ctx: CallContext) -> dict[str, Any]:
        """Ask a human administrator to approve something and wait for the decision.

        Only an explicit approval yields approved=true; a timeout gives timeout=true, approved=false. A
        cut-off call's request stays open: its request_id (hr_…) is in the first progress notification
        (with a progress token) and in mcp_list_pending_requests; resume with
        mcp_wait_for_request(request_id). A call run as an MCP task is followed by its task id."""
        new = NewRequest(
            "approval",
            args.request_message,
            args.context,
            args.timeout_seconds,
            args.urgent,
            agent=ctx.agent.name,
            required_approvals=args.required_approvals,
            step_up=args.step_up,
            provenance=asked_from(ctx),
            escalation=args.escalation or None,
        )
        return await ask_and_wait(broker, new, ctx)

    @registry.tool("mcp_request_admin_input", InputArgs)
    async def request_input(args: InputArgs, ctx: CallContext) -> dict[str, Any]:
        """Ask a human administrator a question and wait for the answer.

        The answer is one of options, when given. On timeout: success=false, timeout=true. Resume a
        cut-off call with mcp_wait_for_request(request_id): the id is in the first progress notification
        and in mcp_list_pending_requests while it is pending."""
        new = NewRequest(
            "input",
            args.question,
            args.context,
            args.timeout_seconds,
            args.urgent,
            args.options,
            agent=ctx.agent.name,
            provenance=asked_from(ctx),
            escalation=args.escalation or None,
        )
        return await ask_and_wait(broker, new, ctx)

    @registry.tool("mcp_wait_for_request", WaitArgs)
    async def wait_for_request(args: WaitArgs, ctx: CallContext) -> dict[str, Any]:
        """Resume waiting on a request by id after a cut-off call.

        Returns the decision as the original call would; if timeout_seconds passes first,
        success=false with error_class hitl_still_pending."""
        view = broker.get(args.request_id, ctx.agent.read_scope)
        return await wait_for_outcome(broker, view, ctx, args.timeout_seconds, time.time())


def _register_deciding(registry: ToolRegistry, broker: HitlBroker) -> None:
    """The tools a responder (or the agent, looking) uses to list, decide and inspect."""

    @registry.tool("mcp_list_pending_requests", ListPendingArgs, read_only=True)
    async def list_pending(args: ListPendingArgs, ctx: CallContext) -> dict[str, Any]:
        """List your requests waiting for a human decision, one page at a time.

        Urgent ones come first, then the soonest to expire; total says how many are pending (up to 1000)
        and next_cursor fetches the next page. A context larger than 8 KiB is left out (context: null,
        context_truncated: true); mcp_get_request_status has it. A stored request that cannot be read
        is left out and named in skipped ({request_id, reason})."""
        if args.limit <= DEFAULT_PAGE:  # a bounded page on an index: well under a millisecond
            page = broker.page_pending(args.limit, args.cursor, ctx.agent.read_scope)
        else:
            import anyio

            page = await anyio.to_thread.run_sync(
                broker.page_pending, args.limit, args.cursor, ctx.agent.read_scope
            )
        rows = [listed(public_view(view)) for view in page.requests]
        return {
            "requests": rows,
            "count": len(rows),
            "total": page.total,
            "total_exact": page.total_exact,
            "truncated": page.next_cursor is not None,
            "next_cursor": page.next_cursor,
            "skipped": page.skipped,
        }

    @registry.tool("mcp_respond_to_request", RespondArgs)
    async def respond(args: RespondArgs, ctx: CallContext) -> dict[str, Any]:
        """Decide a pending request (the operator's tool: a person decides, an agent is refused).

        approved=true/false for approvals, response for input requests. An agent gets
        hitl_decider_not_authorized with where a person decides. The first decision wins; later ones
        fail with hitl_request_already_decided."""
        if ctx.decider is None:
            raise not_authorized(broker.runtime, args.request_id)
        if ctx.decider != "mcp_admin":  # the opt-in decides only what this caller may see
            broker.get(args.request_id, ctx.agent.read_scope)
        view = broker.respond(
            args.request_id, Decision(args.approved, args.response, args.admin_notes, via=ctx.decider)
        )
        return {**status_view(view), "decision": view["status"]}

    @registry.tool("mcp_get_request_status", RequestIdArgs, read_only=True)
    async def get_status(args: RequestIdArgs, ctx: CallContext) -> dict[str, Any]:
        """Report a request's state now, with its decision.

        The state is pending, approved, rejected, answered or expired."""
        return status_view(broker.get(args.request_id, ctx.agent.read_scope))
