"""The read side of subagents: one subagent's status and history, and pages of the list.

A caller scoped to an agent sees only that agent's subagents; any other id reads as not found, so ids
do not leak.
"""

from __future__ import annotations

from typing import Any

from baton.errors import SubagentError
from baton.models.client import ChatTurn
from baton.runtime import Runtime
from baton.store.rows import ListPage, RowShape, Screened, page_of, screen
from baton.subagents import table
from baton.subagents.spend import cost_so_far, usage
from baton.subagents.states import Status


def not_found(subagent_id: str) -> SubagentError:
    """Unknown ids and other agents' subagents read the same (ids do not leak)."""
    return SubagentError("subagent_not_found", f"No subagent has id {subagent_id!r}.")


def hidden(row: Any, agent: str | None) -> bool:
    """Whether ``row`` is another agent's, for a caller scoped to ``agent`` (None: sees every agent's)."""
    return agent is not None and row.agent != agent


def load(runtime: Runtime, subagent_id: str, agent: str | None = None) -> tuple[Any, list[ChatTurn]]:
    """The subagent's row and conversation, or ``subagent_not_found``."""
    with runtime.store.read_prepared() as connection:
        row, turns = table.load(connection, subagent_id)
    if row is None or hidden(row, agent):
        raise not_found(subagent_id)
    return row, turns


def status(runtime: Runtime, subagent_id: str, agent: str | None = None) -> dict[str, Any]:
    """The subagent's state, result, turns, usage and timestamps (``agent``: only that agent's)."""
    row, turns = load(runtime, subagent_id, agent)
    return {
        "success": True,
        "subagent_id": row.id,
        "status": row.status,
        "role": row.role,
        "task": row.task,
        "mode": row.mode,
        "context_strategy": row.context_strategy,
        "result": row.result,
        "error": row.error,
        "error_class": row.error_class,
        "turns": sum(1 for t in turns if t.role == "assistant"),
        "usage": usage(row.input_tokens, row.output_tokens),
        "cost_usd": cost_so_far(row),
        "unpriced_calls": row.unpriced_calls,
        "budget": {"max_total_tokens": row.max_total_tokens, "max_cost_usd": row.max_cost_usd},
        "prep_tokens": row.prep_tokens,
        "filtered_fields": row.filtered_fields,
        "tools": row.tools,
        "subagent_tool_limit": row.tool_limit,
        "waiting_request_id": row.waiting_request_id,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "updated_at": row.updated_at,
        "agent": row.agent,
    }


def history(runtime: Runtime, subagent_id: str) -> list[dict[str, Any]]:
    """The whole conversation, oldest first."""
    _row, turns = load(runtime, subagent_id)
    return [{"role": t.role, "content": t.content} for t in turns]


def page(
    runtime: Runtime,
    status: str | None = None,
    limit: int = 200,
    after: tuple[str, str] | None = None,
    agent: str | None = None,
) -> ListPage:
    """Subagents, newest first, optionally of one status and one agent, with the rows skipped
    (``{subagent_id, reason}``) and the next position; ``after`` = (created_at, id) of the last one seen."""
    with runtime.store.read_prepared() as connection:
        rows = table.list_rows(connection, status, limit + 1, after, agent)
    return page_of(rows, limit, _screen_listed, lambda r: (r.created_at, r.id))


class ListedSubagent(RowShape):
    """What a listed subagent must hold (a stored row that does not is skipped, not listed)."""

    subagent_id: str
    status: Status
    role: str
    mode: str
    context_strategy: str
    task: str
    created_at: str
    updated_at: str


def _listed(row: Any) -> dict[str, Any]:
    return {
        "subagent_id": row.id,
        "status": row.status,
        "role": row.role,
        "mode": row.mode,
        "context_strategy": row.context_strategy,
        "task": row.task,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "agent": row.agent,
    }


def _screen_listed(rows: Any) -> Screened:
    screened = screen(rows, _listed, ListedSubagent, id_key="subagent_id", raw_id=lambda row: row.id)
    for entry in screened.rows:
        entry["task"] = entry["task"][:200]
    return screened
