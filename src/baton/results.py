"""Typed result models of every built-in tool, their titles and annotations: what ``tools/list`` declares.

Each tool's ``outputSchema`` is ``anyOf`` its success model and :class:`ToolError`, so both shapes validate
(the official client validates the structured content of non-error results against it). Success models
name the fields SPEC.md section 3 promises; they allow extra fields, as results may grow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = ["TOOL_META", "ToolError", "ToolMeta", "output_schema"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolError(_Result):
    """Every failure: one human sentence and a stable class (plus the failure's own details)."""

    success: Literal[False]
    error: str = Field(description="What went wrong, in one human sentence.")
    error_class: str = Field(description="Stable snake_case class of the failure (docs/error-classes.md).")


class Ok(_Result):
    """A success."""

    success: Literal[True]


class Usage(_Result):
    """Tokens spent."""

    input_tokens: int
    output_tokens: int
    total_tokens: int


# subagents ----------------------------------------------------------------------------------------


class SpawnResult(Ok):
    """``mcp_spawn_subagent``."""

    subagent_id: str
    status: str = Field(description="queued, running, completed, failed or cancelled.")
    mode: str | None = None
    context_strategy: str | None = None
    prepared_context: str | None = Field(None, description="The exact context text the subagent was given.")
    prep_tokens: int | None = Field(None, description="Tokens of the context-preparation call; 0 when none.")
    filtered_fields: list[str] | None = Field(None, description="Keys removed by the privacy filter.")
    result: str | None = Field(None, description="The subagent's answer (sync mode, when completed).")
    usage: Usage | None = None


class MessageResult(Ok):
    """``mcp_send_message_to_subagent``."""

    subagent_id: str
    response: str | None
    turn: int
    status: str
    usage: Usage | None = None


class SubagentStatus(Ok):
    """``mcp_get_subagent_status``."""

    subagent_id: str
    status: str
    result: str | None = None
    turns: int
    usage: Usage | None = None


class CancelSubagentResult(Ok):
    """``mcp_cancel_subagent``."""

    subagent_id: str
    status: Literal["cancelled"]


class SkippedSubagent(_Result):
    """A stored subagent left out of a list because a value in its row is corrupted."""

    subagent_id: str
    reason: str = Field(description="Which field could not be read (never its value).")


class SkippedTimer(_Result):
    """A stored timer left out of a list because a value in its row is corrupted."""

    timer_id: str
    reason: str = Field(description="Which field could not be read (never its value).")


class SubagentList(Ok):
    """``mcp_list_subagents``."""

    subagents: list[dict[str, Any]]
    count: int
    skipped: list[SkippedSubagent] = Field(
        default_factory=list, description="Stored subagents on this page that could not be read, left out."
    )


# human in the loop --------------------------------------------------------------------------------


class Decided(Ok):
    """A decided approval or input request (``approved`` for approvals, ``response`` for input)."""

    request_id: str
    kind: Literal["approval", "input"]
    status: str
    decision: str = Field(description="approved, rejected or answered.")
    timeout: bool
    approved: bool | None = Field(None, description="Approvals: true only for an explicit approval.")
    response: str | None = Field(None, description="Input requests: the answer.")
    admin_notes: str | None = None
    responded_at: str | None = None
    waited_seconds: float | None = None


class SkippedRequest(_Result):
    """A stored request left out of a list because a value in its row is corrupted."""

    request_id: str
    reason: str = Field(description="Which field could not be read (never its value).")


class PendingList(Ok):
    """``mcp_list_pending_requests``: one page."""

    requests: list[dict[str, Any]]
    count: int
    total: int = Field(description="How many requests are pending in all.")
    truncated: bool = Field(description="True when more pages follow.")
    next_cursor: str | None = Field(None, description="Pass as cursor to get the next page.")
    skipped: list[SkippedRequest] = Field(
        default_factory=list, description="Stored requests on this page that could not be read, left out."
    )


class RequestStatus(Ok):
    """``mcp_get_request_status`` and ``mcp_respond_to_request``."""

    request_id: str
    kind: str
    status: str
    decided: bool
    timeout: bool


# notifications, timers, gateway, ping -------------------------------------------------------------


class Sent(Ok):
    """A notification sent."""

    channel: str
    provider: str | None = None


class Channels(Ok):
    """``mcp_notification_channels``."""

    channels: list[dict[str, Any]]
    ready: list[str]


class TimerSet(Ok):
    """``mcp_set_timer``."""

    timer_id: str
    next_fire_at: str | None


class TimerList(Ok):
    """``mcp_list_timers``."""

    timers: list[dict[str, Any]]
    count: int
    skipped: list[SkippedTimer] = Field(
        default_factory=list, description="Stored timers on this page that could not be read, left out."
    )


class TimerCancelled(Ok):
    """``mcp_cancel_timer``."""

    timer_id: str
    status: str


class AdapterList(Ok):
    """``mcp_list_adapters``."""

    adapters: list[dict[str, Any]]
    count: int


class Pong(Ok):
    """``mcp_ping``."""

    message: str | None
    server: Literal["baton"]
    version: str


@dataclass(frozen=True)
class ToolMeta:
    """How a tool presents itself: its title, result model and behaviour hints."""

    title: str
    result: type[BaseModel]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def annotations(self) -> dict[str, Any]:
        """MCP ``ToolAnnotations`` (destructive/idempotent hints only mean something for writers)."""
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent or self.read_only,
            "openWorldHint": self.open_world,
        }


_RO = {"read_only": True, "idempotent": True}

#: Every built-in tool. Open world: the tool reaches outside baton (a model provider, a notification
#: channel, a person). Destructive: it ends something that cannot be resumed.
TOOL_META: dict[str, ToolMeta] = {
    "mcp_spawn_subagent": ToolMeta("Spawn a subagent", SpawnResult, open_world=True),
    "mcp_send_message_to_subagent": ToolMeta("Message a subagent", MessageResult, open_world=True),
    "mcp_get_subagent_status": ToolMeta("Subagent status", SubagentStatus, **_RO),
    "mcp_cancel_subagent": ToolMeta(
        "Cancel a subagent", CancelSubagentResult, destructive=True, idempotent=True
    ),
    "mcp_list_subagents": ToolMeta("List subagents", SubagentList, **_RO),
    "mcp_request_admin_approval": ToolMeta("Ask a human for approval", Decided, open_world=True),
    "mcp_request_admin_input": ToolMeta("Ask a human a question", Decided, open_world=True),
    "mcp_wait_for_request": ToolMeta("Wait for a human decision", Decided, idempotent=True, open_world=True),
    "mcp_list_pending_requests": ToolMeta("List pending human requests", PendingList, **_RO),
    "mcp_respond_to_request": ToolMeta("Decide a human request", RequestStatus),
    "mcp_get_request_status": ToolMeta("Human request status", RequestStatus, **_RO),
    "mcp_send_email": ToolMeta("Send an email", Sent, open_world=True),
    "mcp_send_telegram_message": ToolMeta("Send a Telegram message", Sent, open_world=True),
    "mcp_send_slack_message": ToolMeta("Send a Slack message", Sent, open_world=True),
    "mcp_send_discord_message": ToolMeta("Send a Discord message", Sent, open_world=True),
    "mcp_send_webhook": ToolMeta("Send a webhook", Sent, open_world=True),
    "mcp_notification_channels": ToolMeta("Notification channel readiness", Channels, **_RO),
    "mcp_set_timer": ToolMeta("Set a timer", TimerSet),
    "mcp_list_timers": ToolMeta("List timers", TimerList, **_RO),
    "mcp_cancel_timer": ToolMeta("Cancel a timer", TimerCancelled, destructive=True, idempotent=True),
    "mcp_list_adapters": ToolMeta("List governed MCP adapters", AdapterList, **_RO),
    "mcp_ping": ToolMeta("Ping baton", Pong, **_RO),
}


def output_schema(result: type[BaseModel]) -> dict[str, Any]:
    """``anyOf`` the success model and :class:`ToolError`, as one self-contained object schema."""
    schema = TypeAdapter(result | ToolError).json_schema()  # type: ignore[arg-type]
    return {"type": "object", **schema}


def clean_description(docstring: str) -> str:
    """A docstring as a tool description: no indentation, each paragraph on one line, summary first."""
    import inspect

    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in part.splitlines()) for part in paragraphs)


def tool_definition(name: str, title: str | None, description: str, input_schema: dict[str, Any]) -> Any:
    """The ``Tool`` that ``tools/list`` shows for a built-in tool."""
    import mcp_types as types

    meta = TOOL_META.get(name)
    if meta is None:  # a tool without metadata still lists, only less described
        return types.Tool(
            name=name, title=title, description=clean_description(description), input_schema=input_schema
        )
    return types.Tool(
        name=name,
        title=meta.title,
        description=clean_description(description),
        input_schema=input_schema,
        output_schema=output_schema(meta.result),
        annotations=types.ToolAnnotations.model_validate(meta.annotations()),
    )
