"""The timer tools of SPEC.md section 3 (the only timer module that knows about MCP)."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import Field

from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry
from baton.store.paging import decode_cursor, encode_cursor
from baton.timers.scheduler import Scheduler
from baton.timers.service import TimerRequest, TimerService

ACTION_HELP = (
    'What to do at each firing: {"kind": "notify", "channel": "email|telegram|slack|discord|webhook", '
    '"message": "..."}, {"kind": "spawn_subagent", "task": "...", "role": "assistant"} or {"kind": "record"}.'
)


class SetTimerArgs(ToolArgs):
    """Arguments of ``mcp_set_timer``: a name, exactly one schedule field, and an action."""

    name: str = Field(min_length=1, max_length=200, description="A label for the timer.")
    fire_at: str | None = Field(
        None,
        max_length=64,
        description="One-shot at this ISO 8601 time with a zone, e.g. 2026-01-31T09:00:00Z.",
    )
    delay_seconds: float | None = Field(None, description="One-shot this many seconds from now (> 0).")
    interval_seconds: float | None = Field(
        None,
        description="Repeat every this many seconds (at least 0.1 for record, 10 for notify, 60 for "
        "spawn_subagent by default); the first firing is one interval from now.",
    )
    action: dict[str, Any] = Field(description=ACTION_HELP)


class ListTimersArgs(ToolArgs):
    """Arguments of ``mcp_list_timers``."""

    status: Literal["active", "completed", "cancelled"] | None = Field(
        None, description="Only timers with this status (default: all)."
    )
    limit: int = Field(500, ge=1, le=1000, description="Timers per page (at most 1000).")
    cursor: str | None = Field(
        None, max_length=200, description="next_cursor of the previous page, to continue the list."
    )


class TimerIdArgs(ToolArgs):
    """Arguments naming one timer."""

    timer_id: str = Field(min_length=1, max_length=64, description="The id mcp_set_timer returned.")


def register(registry: ToolRegistry) -> None:
    """Add the timer tools and the background scheduler to the registry."""
    service = TimerService(registry.runtime)
    scheduler = Scheduler(registry.runtime, service)
    registry.runtime.services["timers"] = service
    registry.on_start(scheduler.run)

    @registry.tool("mcp_set_timer", SetTimerArgs)
    async def set_timer(args: SetTimerArgs, ctx: CallContext) -> dict[str, Any]:
        """Set a persistent timer that notifies, spawns an async subagent or only records.

        One-shot with fire_at or delay_seconds, repeating with interval_seconds; returns timer_id and
        next_fire_at. Timers survive restarts."""
        return service.set(TimerRequest(**args.model_dump(), agent=ctx.agent.name))

    @registry.tool("mcp_list_timers", ListTimersArgs, read_only=True, quiet=True)
    async def list_timers(args: ListTimersArgs, ctx: CallContext) -> dict[str, Any]:
        """List your timers in the order they were set.

        Each shows its status, next_fire_at and last firing; next_cursor continues a truncated list;
        unreadable ones are named in skipped."""
        after = decode_cursor(args.cursor)
        scope = ctx.agent.read_scope
        page = await anyio.to_thread.run_sync(lambda: service.page(args.status, args.limit, after, scope))
        return {
            "timers": page.rows,
            "count": len(page.rows),
            "truncated": page.next_after is not None,
            "next_cursor": encode_cursor(*page.next_after) if page.next_after else None,
            "skipped": page.skipped,
        }

    @registry.tool("mcp_cancel_timer", TimerIdArgs)
    async def cancel_timer(args: TimerIdArgs, ctx: CallContext) -> dict[str, Any]:
        """Cancel an active timer for good.

        It never fires again."""
        return service.cancel(args.timer_id, ctx.agent.write_scope)
