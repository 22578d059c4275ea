"""Each built-in tool's definition in ``tools/list``: its title, result model and behaviour hints by name.

A tool's ``outputSchema`` is ``anyOf`` the result model named here and :class:`~baton.results.base.ToolError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.results.base import ToolError
from baton.results.gateway import AdapterList
from baton.results.hitl import ApprovalDecided, InputDecided, PendingList, RequestStatus, Responded
from baton.results.notify import Channels, Sent
from baton.results.ping import Pong
from baton.results.subagents import (
    CancelSubagentResult,
    MessageResult,
    SpawnResult,
    SubagentList,
    SubagentStatus,
)
from baton.results.timers import TimerList, TimerResult

__all__ = ["TOOL_META", "ToolMeta", "output_schema", "tool_definition"]


@dataclass(frozen=True)
class ToolMeta:
    """How a tool presents itself: its title, result model and behaviour hints."""

    title: str
    result: Any  # a result model, or a union of them
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
    "mcp_request_admin_approval": ToolMeta("Ask a human for approval", ApprovalDecided, open_world=True),
    "mcp_request_admin_input": ToolMeta("Ask a human a question", InputDecided, open_world=True),
    "mcp_wait_for_request": ToolMeta(
        "Wait for a human decision", ApprovalDecided | InputDecided, idempotent=True, open_world=True
    ),
    "mcp_list_pending_requests": ToolMeta("List pending human requests", PendingList, **_RO),
    "mcp_respond_to_request": ToolMeta("Decide a human request", Responded),
    "mcp_get_request_status": ToolMeta("Human request status", RequestStatus, **_RO),
    "mcp_send_email": ToolMeta("Send an email", Sent, open_world=True),
    "mcp_send_telegram_message": ToolMeta("Send a Telegram message", Sent, open_world=True),
    "mcp_send_slack_message": ToolMeta("Send a Slack message", Sent, open_world=True),
    "mcp_send_discord_message": ToolMeta("Send a Discord message", Sent, open_world=True),
    "mcp_send_webhook": ToolMeta("Send a webhook", Sent, open_world=True),
    "mcp_notification_channels": ToolMeta("Notification channel readiness", Channels, **_RO),
    "mcp_set_timer": ToolMeta("Set a timer", TimerResult),
    "mcp_list_timers": ToolMeta("List timers", TimerList, **_RO),
    "mcp_cancel_timer": ToolMeta("Cancel a timer", TimerResult, destructive=True, idempotent=True),
    "mcp_list_adapters": ToolMeta("List governed MCP adapters", AdapterList, **_RO),
    "mcp_ping": ToolMeta("Ping baton", Pong, **_RO),
}


def output_schema(result: Any) -> dict[str, Any]:
    """``anyOf`` the success shape and :class:`ToolError`, as one self-contained object schema."""
    from baton.boundary import json_schema

    return json_schema.output_schema(result | ToolError)


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
