"""The human-in-the-loop tools of SPEC.md section 3 (the only module here that knows about MCP)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, StrictBool, StrictInt

from baton.errors import HitlError
from baton.hitl.broker import HitlBroker, get_broker
from baton.hitl.records import MAX_TEXT, MAX_TIMEOUT_SECONDS, Decision, NewRequest, public_view
from baton.toolkit import CallContext, ToolArgs, ToolRegistry

#: Pending requests per page of ``mcp_list_pending_requests``: the default and the most one call may ask.
DEFAULT_PAGE = 100
MAX_PAGE = 500

TimeoutField = Field(
    None,
    ge=1,
    le=MAX_TIMEOUT_SECONDS,
    description="Seconds to wait for a decision; default HITL_TIMEOUT_SECONDS. The request expires then.",
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


class InputArgs(ToolArgs):
    """Arguments of ``mcp_request_admin_input``."""

    question: str = Field(min_length=1, max_length=MAX_TEXT, description="The question for the human.")
    context: dict[str, Any] | None = Field(
        None, description="Facts the human needs to answer (a JSON object)."
    )
    timeout_seconds: int | None = TimeoutField
    urgent: StrictBool = Field(False, description="Listed first and flagged in notifications.")
    options: list[str] | None = Field(
        None, min_length=1, description="When given, the answer must be one of these."
    )


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

    request_id: str = Field(min_length=1, max_length=40)
    approved: StrictBool | None = Field(None, description="Approvals: true approves, false rejects.")
    response: str | None = Field(None, max_length=MAX_TEXT, description="Input requests: the answer.")
    admin_notes: str | None = Field(None, max_length=MAX_TEXT, description="Notes returned to the agent.")


class RequestIdArgs(ToolArgs):
    """Arguments naming one request."""

    request_id: str = Field(min_length=1, max_length=40)


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
    shown = {key: value for key, value in view.items() if key != "expires_epoch"}
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

    from baton.hitl.elicit import elicit_decision, elicitation_wanted

    settings = broker.runtime.settings
    total = view["expires_epoch"] - started
    message = f"Waiting for a human decision on {view['request_id']}"

    async def tick(waited: float, window_total: float) -> None:
        """One progress notification: seconds waited of the window's total."""
        await ctx.progress(round(waited, 1), round(window_total, 1), message)

    await ctx.progress(0.0, round(total if window is None else min(window, total), 1), message)
    async with anyio.create_task_group() as group:
        if elicitation_wanted(settings, ctx):
            group.start_soon(elicit_decision, broker, view, ctx)
        final = await broker.wait(
            view["request_id"],
            window_seconds=window,
            tick=tick,
            tick_seconds=settings.baton_hitl_progress_seconds,
        )
        group.cancel_scope.cancel()
    return outcome(final)


def not_authorized(request_id: str) -> HitlError:
    """The refusal an MCP caller without decision authority gets; the request stays pending."""
    return HitlError(
        "hitl_decider_not_authorized",
        f"An MCP client may not decide request {request_id}: a person decides it in the inbox, with "
        "`baton hitl approve|reject|answer`, or through the client's elicitation. To let MCP clients of this "
        "server decide (test harnesses, an operator's own console), set BATON_HITL_ALLOW_MCP_DECISIONS=1, "
        "or call over HTTP with BATON_ADMIN_TOKEN. The request is still pending.",
        request_id=request_id,
    )


def register(registry: ToolRegistry) -> None:
    """Add the human-in-the-loop tools to the registry."""
    broker = get_broker(registry.runtime)
    _register_asking(registry, broker)
    _register_deciding(registry, broker)


def _register_asking(registry: ToolRegistry, broker: HitlBroker) -> None:
    """The tools an agent uses to ask and to wait."""

    @registry.tool("mcp_request_admin_approval", ApprovalArgs)
    async def request_approval(args: ApprovalArgs, ctx: CallContext) -> dict[str, Any]:
        """Ask a human administrator to approve something and wait for the decision. Only an explicit
        approval yields approved=true; on timeout: success=false, timeout=true, approved=false. If this call
        is cut off, the request stays open: resume with mcp_wait_for_request(request_id)."""
        started = time.time()
        view = await broker.create(
            NewRequest("approval", args.request_message, args.context, args.timeout_seconds, args.urgent)
        )
        return await wait_for_outcome(broker, view, ctx, None, started)

    @registry.tool("mcp_request_admin_input", InputArgs)
    async def request_input(args: InputArgs, ctx: CallContext) -> dict[str, Any]:
        """Ask a human administrator a question and wait for the answer (one of options, when given).
        On timeout: success=false, timeout=true. Resume a cut-off call with mcp_wait_for_request."""
        started = time.time()
        new = NewRequest(
            "input", args.question, args.context, args.timeout_seconds, args.urgent, args.options
        )
        view = await broker.create(new)
        return await wait_for_outcome(broker, view, ctx, None, started)

    @registry.tool("mcp_wait_for_request", WaitArgs)
    async def wait_for_request(args: WaitArgs, ctx: CallContext) -> dict[str, Any]:
        """Resume waiting on a request by id (after a cut-off call). Returns the decision as the original
        call would; if timeout_seconds passes first, success=false with error_class hitl_still_pending."""
        view = broker.get(args.request_id)
        return await wait_for_outcome(broker, view, ctx, args.timeout_seconds, time.time())


def _register_deciding(registry: ToolRegistry, broker: HitlBroker) -> None:
    """The tools a responder (or the agent, looking) uses to list, decide and inspect."""

    @registry.tool("mcp_list_pending_requests", ListPendingArgs, read_only=True)
    async def list_pending(args: ListPendingArgs, ctx: CallContext) -> dict[str, Any]:
        """List the requests waiting for a human decision, urgent first, then the soonest to expire.
        One page at a time: total says how many are pending, next_cursor fetches the next page."""
        page = broker.page_pending(args.limit, args.cursor)
        rows = [public_view(view) for view in page.requests]
        return {
            "requests": rows,
            "count": len(rows),
            "total": page.total,
            "truncated": page.next_cursor is not None,
            "next_cursor": page.next_cursor,
        }

    @registry.tool("mcp_respond_to_request", RespondArgs)
    async def respond(args: RespondArgs, ctx: CallContext) -> dict[str, Any]:
        """Decide a pending request: approved=true/false for approvals, response for input requests.
        By default a person decides (inbox, CLI, elicitation) and this tool is refused with
        hitl_decider_not_authorized; BATON_HITL_ALLOW_MCP_DECISIONS=1 or the HTTP admin credential
        lets MCP callers decide. The first decision wins; later ones fail with hitl_request_already_decided."""
        if ctx.decider is None:
            raise not_authorized(args.request_id)
        view = broker.respond(
            args.request_id, Decision(args.approved, args.response, args.admin_notes, via=ctx.decider)
        )
        return {**status_view(view), "decision": view["status"]}

    @registry.tool("mcp_get_request_status", RequestIdArgs, read_only=True)
    async def get_status(args: RequestIdArgs, ctx: CallContext) -> dict[str, Any]:
        """A request's state now: pending, approved, rejected, answered or expired, with its decision."""
        return status_view(broker.get(args.request_id))
