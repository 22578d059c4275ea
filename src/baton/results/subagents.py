"""Results of the subagent tools: a spawn, a message, a status, a cancellation and a list."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from baton.results.base import Ok, Result

SubagentState = Literal["queued", "running", "completed", "failed", "cancelled"]
#: What a spawn or a message answers: a state, or that a tool call of the subagent waits for a person.
TurnState = Literal["queued", "running", "completed", "failed", "cancelled", "waiting_for_approval"]
Strategy = Literal["minimal", "llm_generated", "full"]


class Usage(Result):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class ReceiptLink(Result):
    seq: int | None
    sha256: str | None


class SpawnResult(Ok):
    subagent_id: str
    status: TurnState
    mode: Literal["sync", "async"]
    context_strategy: Strategy
    role: str
    prepared_context: str = Field(description="The exact context it was given.")
    prep_tokens: int = Field(description="Tokens of the preparation call.")
    filtered_fields: list[str] = Field(description="Keys removed by the privacy filter.")
    result: str | None = Field(description="Its answer (sync, when completed).")
    usage: Usage
    cost_usd: float | None = Field(description="USD spent so far; null for an unpriced model.")
    unpriced_calls: int = Field(0, description="Sync: model calls without a price.")
    tools: list[str] | None = None
    subagent_tool_limit: int | None = None
    spawn_receipt: ReceiptLink | None = None
    request_id: str | None = Field(None, description="waiting_for_approval: the request it waits on.")


class MessageResult(Ok):
    subagent_id: str
    response: str | None = None
    turn: int = Field(description="Assistant turns so far.")
    status: TurnState
    usage: Usage | None = Field(None, description="Tokens of this turn.")
    cost_usd: float | None = Field(None, description="USD of this turn; null for an unpriced model.")
    subagent_usage: Usage | None = Field(None, description="Tokens of the whole subagent so far.")
    subagent_cost_usd: float | None = None
    request_id: str | None = Field(None, description="waiting_for_approval: the request it waits on.")


class Budget(Result):
    max_total_tokens: int | None
    max_cost_usd: float | None


class SubagentStatus(Ok):
    subagent_id: str
    status: SubagentState
    role: str
    task: str
    mode: Literal["sync", "async"]
    context_strategy: Strategy
    result: str | None = Field(description="The latest answer.")
    error: str | None = Field(description="Why a failed or cancelled subagent stopped.")
    error_class: str | None
    turns: int
    usage: Usage
    cost_usd: float | None
    unpriced_calls: int
    budget: Budget
    prep_tokens: int
    filtered_fields: list[str]
    tools: list[str] | None = None
    subagent_tool_limit: int | None = None
    waiting_request_id: str | None = None
    created_at: str
    started_at: str | None
    finished_at: str | None
    updated_at: str
    agent: str | None = None


class CancelSubagentResult(Ok):
    subagent_id: str
    status: Literal["cancelled"]
    previous_status: SubagentState
    cancelled_in_flight_call: bool


class SubagentRow(Result):
    subagent_id: str
    status: SubagentState
    role: str
    mode: Literal["sync", "async"]
    context_strategy: Strategy
    task: str = Field(description="The task's first 200 characters.")
    created_at: str
    updated_at: str
    agent: str | None = None


class SkippedSubagent(Result):
    """A stored subagent left out of a list because a value in its row is corrupted."""

    subagent_id: str
    reason: str = Field(description="The unreadable field (never its value).")


class SubagentList(Ok):
    subagents: list[SubagentRow]
    count: int
    truncated: bool = Field(description="True when more pages follow.")
    next_cursor: str | None = Field(description="The next page's cursor.")
    skipped: list[SkippedSubagent] = Field(
        default_factory=list, description="Unreadable stored subagents on this page, left out."
    )
