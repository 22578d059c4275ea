"""The subagent tools of SPEC.md section 3 (the only module here that knows about MCP)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from baton.boundary.limits import DEFAULT_PAGE, MAX_PAGE
from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry
from baton.store.paging import decode_cursor, encode_cursor
from baton.subagents.context import ContextStrategy
from baton.subagents.delegating import Delegation
from baton.subagents.runner import SpawnRequest, SubagentRunner


class SpawnArgs(ToolArgs):
    """Arguments of ``mcp_spawn_subagent``."""

    task: str = Field(min_length=1, description="What the subagent must do.")
    role: str = Field(
        "assistant",
        min_length=1,
        max_length=200,
        description="Its role, e.g. 'refund specialist'.",
    )
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync waits for the first answer; async returns at once."
    )
    context_strategy: ContextStrategy = Field(
        "minimal",
        description="minimal: minimal_slice only; llm_generated: distilled under business_rules; full: all.",
    )
    parent_context: dict[str, Any] | None = Field(None, description="The parent's context (JSON).")
    minimal_slice: list[Annotated[str, Field(max_length=200)]] | None = Field(
        None, max_length=200, description="Dotted key paths minimal keeps."
    )
    business_rules: str | None = Field(None, description="Rules for llm_generated.")
    max_total_tokens: int | None = Field(None, ge=1, description="Token budget of the whole subagent.")
    max_cost_usd: float | None = Field(None, gt=0, description="Cost budget in US dollars.")
    tools: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        max_length=100,
        description="Tools it may call: {adapter_id}__{tool} or built-ins (docs/subagents.md).",
    )
    subagent_tool_limit: int | None = Field(None, ge=1, le=1000, description="Most tool calls per turn.")
    read_only: bool = Field(False, description="Only read-only tools, for it and its subagents.")
    constraints: dict[str, str] | None = Field(
        None, max_length=100, description="Per tool, a Cedar condition on context.arguments."
    )
    max_seconds: int | None = Field(None, ge=1, description="Its wall time.")


class SubagentIdArgs(ToolArgs):
    """Arguments naming one subagent."""

    subagent_id: str = Field(min_length=1, max_length=64, description="The id mcp_spawn_subagent returned.")


class MessageArgs(SubagentIdArgs):
    """Arguments of ``mcp_send_message_to_subagent``."""

    message: str = Field(min_length=1, description="The next message for the subagent.")


class ListArgs(ToolArgs):
    """Arguments of ``mcp_list_subagents``."""

    status: Literal["queued", "running", "completed", "failed", "cancelled"] | None = Field(
        None, description="Only subagents in this status; all when omitted."
    )
    limit: int = Field(DEFAULT_PAGE, ge=1, le=MAX_PAGE, description="Subagents per page (at most 200).")
    cursor: str | None = Field(
        None, max_length=200, description="next_cursor of the previous page, to continue the list."
    )


def spawning_agent(ctx: CallContext) -> str:
    """The agent that asks, as approval requests name it (:func:`baton.identity.agents.current_agent`)."""
    return ctx.agent.name


def register(registry: ToolRegistry) -> None:
    """Add the subagent tools and their background work to the registry."""
    runner = SubagentRunner(registry.runtime, registry=registry)
    registry.runtime.services["subagents"] = runner

    async def maintain() -> None:
        try:
            await runner.maintain()
        finally:
            await runner.aclose()

    registry.on_start(maintain)
    registry.on_start(runner.warm_up)

    @registry.tool("mcp_spawn_subagent", SpawnArgs)
    async def spawn(args: SpawnArgs, ctx: CallContext) -> dict[str, Any]:
        """Delegate a task to a subagent model, with at most your authority.

        Its context is privacy-filtered, then prepared; sync returns the first answer, async an id for
        mcp_get_subagent_status."""
        return await runner.spawn(
            SpawnRequest(
                **args.model_dump(),
                agent=ctx.agent.name,
                parent_agent=spawning_agent(ctx),
                parent=Delegation.of_caller(ctx.on_behalf),
            ),
            ctx.receipt_in,
        )

    @registry.tool("mcp_send_message_to_subagent", MessageArgs)
    async def send_message(args: MessageArgs, ctx: CallContext) -> dict[str, Any]:
        """Send another message to a subagent.

        It answers with its whole conversation in view."""
        return await runner.send_message(
            args.subagent_id, args.message, ctx.agent.write_scope, spawning_agent(ctx)
        )

    @registry.tool("mcp_get_subagent_status", SubagentIdArgs, read_only=True, quiet=True)
    async def get_status(args: SubagentIdArgs, ctx: CallContext) -> dict[str, Any]:
        """Report a subagent's status, result, turns and usage.

        The status is queued, running, completed, failed or cancelled."""
        return runner.status(args.subagent_id, ctx.agent.read_scope)

    @registry.tool("mcp_cancel_subagent", SubagentIdArgs)
    async def cancel(args: SubagentIdArgs, ctx: CallContext) -> dict[str, Any]:
        """Cancel a queued or running subagent.

        Its in-flight model and tool calls are cancelled; nothing of it runs after."""
        return await runner.cancel_and_wait(args.subagent_id, ctx.agent.write_scope)

    @registry.tool("mcp_list_subagents", ListArgs, read_only=True, quiet=True)
    async def list_subagents(args: ListArgs, ctx: CallContext) -> dict[str, Any]:
        """List your subagents, newest first, optionally by status.

        One page at a time: truncated and next_cursor continue the list. A stored subagent that cannot be
        read is left out and named in skipped."""
        after = decode_cursor(args.cursor)
        scope = ctx.agent.read_scope
        if args.limit <= DEFAULT_PAGE:  # a bounded page on an index, prepared: read where it is asked
            page = runner.page(args.status, args.limit, after, scope)
        else:
            import anyio

            page = await anyio.to_thread.run_sync(lambda: runner.page(args.status, args.limit, after, scope))
        return {
            "subagents": page.rows,
            "count": len(page.rows),
            "truncated": page.next_after is not None,
            "next_cursor": encode_cursor(*page.next_after) if page.next_after else None,
            "skipped": page.skipped,
        }
