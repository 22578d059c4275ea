"""Results of the human-in-the-loop tools: a decided request, the pending list, a request's status."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from baton.results.base import Ok, Result

RequestState = Literal["pending", "approved", "rejected", "answered", "expired"]


class _Decided(Ok):
    """A decided request, as the asking call (or ``mcp_wait_for_request``) returns it."""

    request_id: str
    kind: Literal["approval", "input"]
    status: RequestState
    decision: Literal["approved", "rejected", "answered"]
    timeout: Literal[False]
    admin_notes: str | None
    responded_at: str | None
    waited_seconds: float = Field(description="Seconds from creation to decision.")
    decided_by: str | None = None  # a person's name, operator, the OS user (docs/hitl.md, "Who decided")
    decided_via: str | None = None  # passkey, admin_token, cli, link, slack, telegram, …
    reached_via: list[str] = Field(
        default_factory=list
    )  # the paths that told someone: progress, chat, console, … (docs/hitl.md)


class ApprovalDecided(_Decided):
    approved: bool = Field(description="True only for an explicit approval.")


class InputDecided(_Decided):
    response: str | None = Field(description="The answer; null when declined.")
    declined: bool = Field(description="True when the person declined to answer.")


class PendingRequest(Result):
    request_id: str
    kind: Literal["approval", "input"]
    message: str
    context: dict[str, Any] | None
    context_truncated: bool = Field(description="True when a context over 8 KiB was left out.")
    options: list[str] | None
    urgent: bool
    created_at: str
    expires_at: str
    agent: str | None = None


class SkippedRequest(Result):
    """A stored request left out of a list because a value in its row is corrupted."""

    request_id: str
    reason: str = Field(description="The unreadable field (never its value).")


class PendingList(Ok):
    requests: list[PendingRequest]
    count: int
    total: int = Field(description="How many are pending in all, counted up to 1000.")
    total_exact: bool = Field(description="False past 1000 pending (total is then 1000).")
    truncated: bool = Field(description="True when more pages follow.")
    next_cursor: str | None = Field(description="The next page's cursor.")
    skipped: list[SkippedRequest] = Field(
        default_factory=list, description="Unreadable stored requests on this page, left out."
    )


class RequestStatus(Ok):
    request_id: str
    kind: Literal["approval", "input"]
    status: RequestState
    message: str
    context: dict[str, Any] | None
    options: list[str] | None
    urgent: bool
    created_at: str
    expires_at: str
    approved: bool
    response: str | None = None
    admin_notes: str | None
    responded_at: str | None
    decided_via: str | None = Field(
        description="Its path: passkey, admin_token, cli, link, slack, telegram, elicitation, mcp…"
    )
    waiter_gone: bool | None = Field(description="True when no call was waiting when the decision came.")
    decided_by: str | None = None
    required_approvals: int = 1
    approvals: list[str] = Field(default_factory=list)
    step_up: bool = False
    arguments_sha256: str | None = None
    decided: bool
    timeout: bool = Field(description="True once the request expired undecided.")
    agent: str | None = None
    reached_via: list[str] = Field(default_factory=list)


class Responded(RequestStatus):
    decision: Literal["approved", "rejected", "answered", "pending"]  # pending: a quorum's partial approval
