"""A follow-up message's steps: the checks and the user turn, stored in one transaction, and the answer.
Running the turn it starts, and waiting on it, are the runner's."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from baton.errors import SubagentError
from baton.evidence.receipts import utc_now
from baton.models.client import ModelClient, ModelReply
from baton.runtime import Runtime
from baton.store.schema import subagents
from baton.subagents import queries, table
from baton.subagents.spend import check_subagent_budget, usage
from baton.subagents.states import ACTIVE, TERMINAL


def add_user_turn(
    runtime: Runtime, models: ModelClient, subagent_id: str, message: str, agent: str | None
) -> None:
    """Add ``message`` (redacted) to a finished conversation and mark the subagent running, in one
    transaction; refused before anything is written when the subagent cannot take it or a budget is spent."""
    now = utc_now()
    with runtime.store.write() as connection:
        row = _between_turns(connection, subagent_id, agent)
        check_subagent_budget(row, subagent_id=subagent_id)
        models.daily.check()
        position = table.message_count(connection, subagent_id)
        table.add_message(connection, subagent_id, position, "user", runtime.redactor.text(message))
        connection.execute(
            update(subagents)
            .where(subagents.c.id == subagent_id)
            .values(status="running", updated_at=now, error=None, error_class=None)
        )


def _between_turns(connection: Connection, subagent_id: str, agent: str | None) -> Any:
    """The subagent's row when it has finished a turn: ``subagent_not_found`` (``agent``: also for another
    agent's), ``subagent_busy`` while a turn runs, ``subagent_already_terminal`` once it has ended."""
    row = connection.execute(select(subagents).where(subagents.c.id == subagent_id)).first()
    if row is None or queries.hidden(row, agent):
        raise queries.not_found(subagent_id)
    if row.status in ACTIVE:
        raise SubagentError(
            "subagent_busy", "The subagent is still working on its current turn.", status=row.status
        )
    if row.status in TERMINAL:
        raise SubagentError("subagent_already_terminal", f"The subagent is {row.status}.", status=row.status)
    return row


def waiting_answer(subagent_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """The answer while the turn waits on a human approval past the sync wait (the turn goes on)."""
    return {
        "success": True,
        "subagent_id": subagent_id,
        "status": "waiting_for_approval",
        "request_id": state["waiting_request_id"],
        "turn": state["turns"],
    }


def turn_answer(subagent_id: str, state: dict[str, Any], reply: ModelReply | None) -> dict[str, Any]:
    """The answer once the turn has ended, from the subagent's ``state``: the response with this turn's
    spend and the subagent's, or why it did not complete (``reply`` None: no answer was recorded)."""
    if state["status"] != "completed" or reply is None:
        return {
            "success": False,
            "subagent_id": subagent_id,
            "status": state["status"],
            "error": state["error"],
            "error_class": state["error_class"],
            "turn": state["turns"],
        }
    return {
        "success": True,
        "subagent_id": subagent_id,
        "response": state["result"],
        "turn": state["turns"],
        "status": "completed",
        "usage": usage(reply.input_tokens, reply.output_tokens),
        "cost_usd": reply.cost_usd,
        "subagent_usage": state["usage"],
        "subagent_cost_usd": state["cost_usd"],
    }
