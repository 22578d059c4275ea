"""The human-in-the-loop tools of SPEC.md section 3: their arguments, their results and their registration.

Waiting for a decision is :mod:`baton.hitl.waiting`'s; who asks is :mod:`baton.hitl.provenance`'s.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt

from baton import clock
from baton.boundary.limits import LIST_CONTEXT_BYTES, fits
from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry
from baton.errors import HitlError
from baton.escalation_steps import MAX_TEXT as STEPS_MAX_TEXT
from baton.hitl.broker import HitlBroker, get_broker
from baton.hitl.provenance import asked_from
from baton.hitl.reach import where_people_decide
from baton.hitl.records import MAX_TEXT, MAX_TIMEOUT_SECONDS, Decision, NewRequest, public_view
from baton.hitl.waiting import ask_and_wait, wait_for_outcome

#: Pending requests per page of ``mcp_list_pending_requests``: the default and the most one call may ask.
DEFAULT_PAGE = 100
MAX_PAGE = 500
#: Keys of a request's view the agent is not given: the person deciding is shown provenance
#: (:mod:`baton.hitl.present`); each decider's notes reach the agent joined in ``admin_notes``.
_NOT_SHOWN = frozenset({"expires_epoch", "provenance", "notes"})

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
        description="Approval needs a fresh passkey check bound to this request and its context.",
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


def status_view(view: dict[str, Any]) -> dict[str, Any]:
    """The full state of a request as ``mcp_get_request_status`` reports it."""
    shown = {key: value for key, value in view.items() if key not in _NOT_SHOWN}
    return {
        **shown,
        "decided": view["status"] in ("approved", "rejected", "answered"),
        "timeout": view["status"] == "expired",
    }


def listed(row: dict[str, Any]) -> dict[str, Any]:
    """A pending request as listed: a large context is left out and flagged, so a list stays small."""
    truncated = row.get("context") is not None and not fits(row["context"], LIST_CONTEXT_BYTES)
    return {**row, "context": None if truncated else row.get("context"), "context_truncated": truncated}


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
        and in mcp_list_pending_requests; resume with mcp_wait_for_request. An MCP task call is followed
        by its task id."""
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
        cut-off call with mcp_wait_for_request: the id is in the first progress notification and in
        mcp_list_pending_requests."""
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
        return await wait_for_outcome(broker, view, ctx, args.timeout_seconds, clock.time())


def _register_deciding(registry: ToolRegistry, broker: HitlBroker) -> None:
    """The tools a responder (or the agent, looking) uses to list, decide and inspect."""

    @registry.tool("mcp_list_pending_requests", ListPendingArgs, read_only=True, quiet=True)
    async def list_pending(args: ListPendingArgs, ctx: CallContext) -> dict[str, Any]:
        """List your requests waiting for a human decision, one page at a time.

        Urgent ones come first, then the soonest to expire; total says how many are pending (up to 1000)
        and next_cursor fetches the next page. A context larger than 8 KiB is left out (context: null,
        context_truncated: true); mcp_get_request_status has it. Unreadable stored requests are named
        in skipped."""
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

    @registry.tool("mcp_get_request_status", RequestIdArgs, read_only=True, quiet=True)
    async def get_status(args: RequestIdArgs, ctx: CallContext) -> dict[str, Any]:
        """Report a request's state now, with its decision.

        The state is pending, approved, rejected, answered or expired."""
        return status_view(broker.get(args.request_id, ctx.agent.read_scope))
