"""Request records: constants, the typed inputs, the row-to-view mapping and the rules a decision must meet."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from baton.errors import HitlError
from baton.rows import RowShape, Screened, finite, load_json, screen

Kind = Literal["approval", "input"]
Status = Literal["pending", "approved", "rejected", "answered", "expired"]
DECIDED: tuple[str, ...] = ("approved", "rejected", "answered")
#: The longest a request may stay open (30 days).
MAX_TIMEOUT_SECONDS = 30 * 86_400
MAX_TEXT = 20_000


def iso(epoch: float) -> str:
    """ISO 8601 UTC with microseconds (fixed width, so stored strings sort by time)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class NewRequest:
    """What an agent asks a human."""

    kind: Kind
    message: str
    context: dict[str, Any] | None = None
    timeout_seconds: int | None = None
    urgent: bool = False
    options: list[str] | None = None
    #: The agent that asks (``baton.agents.Caller.name``); None for the operator's own tools.
    agent: str | None = None


@dataclass(frozen=True)
class Decision:
    """What a responder submits; ``via`` names the channel (mcp, cli, inbox, link, elicitation)."""

    approved: bool | None = None
    response: str | None = None
    admin_notes: str | None = None
    via: str = "mcp"


def public_view(view: dict[str, Any]) -> dict[str, Any]:
    """A request as ``mcp_list_pending_requests`` lists it."""
    keys = (
        "request_id",
        "kind",
        "message",
        "context",
        "options",
        "urgent",
        "created_at",
        "expires_at",
        "agent",
    )
    return {key: view[key] for key in keys}


def row_view(row: Any) -> dict[str, Any]:
    return {
        "request_id": row.id,
        "kind": row.kind,
        "status": row.status,
        "message": row.message,
        "context": row.context,
        "options": row.options,
        "urgent": bool(row.urgent),
        "created_at": row.created_at,
        "expires_at": row.expires_at,
        "expires_epoch": row.expires_epoch,
        "approved": row.status == "approved" and row.approved is True,
        "response": row.response,
        "admin_notes": row.admin_notes,
        "responded_at": row.responded_at,
        "decided_via": row.decided_via,
        "waiter_gone": row.waiter_gone,
        "agent": row.agent,
    }


class ListedRequest(RowShape):
    """What a listed request must hold (a stored row that does not is skipped, not listed)."""

    request_id: str
    kind: Kind
    status: Status
    message: str
    context: dict[str, Any] | None
    options: list[str] | None
    urgent: bool
    created_at: str
    expires_at: str
    expires_epoch: float


def _listed_view(row: Any) -> dict[str, Any]:
    view = row_view(row)
    view["context"] = load_json(row.context, "context")
    view["options"] = load_json(row.options, "options")
    view["urgent"] = row.urgent
    view["expires_epoch"] = finite(row.expires_epoch, "expires_epoch")
    return view


def screen_requests(rows: Any) -> Screened:
    """Views of request rows read with raw JSON columns; a corrupted row is skipped with its reason."""
    return screen(rows, _listed_view, ListedRequest, id_key="request_id", raw_id=lambda row: row.id)


def not_found(request_id: str) -> HitlError:
    """The refusal for an unknown id, and for another agent's (so that ids do not leak)."""
    return HitlError(
        "hitl_request_not_found",
        f"No human-in-the-loop request has the id {request_id!r}.",
        request_id=request_id,
    )


def already_decided(request_id: str) -> HitlError:
    return HitlError(
        "hitl_request_already_decided",
        f"The request {request_id} was already decided; the first decision stands.",
        request_id=request_id,
    )


def link_used(request_id: str) -> HitlError:
    return HitlError("hitl_link_invalid", "This link was already used.", request_id=request_id)


def refusal(row: Any, now: float, request_id: str) -> HitlError | None:
    if row is None:
        return not_found(request_id)
    if row.status == "expired" or (row.status == "pending" and row.expires_epoch <= now):
        return HitlError(
            "hitl_request_expired",
            f"The request {request_id} expired before this decision.",
            request_id=request_id,
        )
    if row.status != "pending":
        return already_decided(request_id)
    return None


def decision_values(row: Any, decision: Decision, redact: Any) -> dict[str, Any]:
    """Validate a decision against the request's kind; returns the columns to set."""
    notes = decision.admin_notes
    if notes is not None and len(notes) > MAX_TEXT:
        raise HitlError("hitl_response_invalid", "admin_notes is too long.", request_id=row.id)
    clean_notes = redact(notes) if notes is not None else None
    if row.kind == "approval":
        if not isinstance(decision.approved, bool):
            raise HitlError(
                "hitl_response_invalid",
                "An approval needs approved set to true or false.",
                request_id=row.id,
            )
        status = "approved" if decision.approved is True else "rejected"
        return {
            "status": status,
            "approved": decision.approved is True,
            "response": None,
            "admin_notes": clean_notes,
        }
    if decision.approved is False and decision.response is None:
        return {"status": "rejected", "approved": False, "response": None, "admin_notes": clean_notes}
    if (
        not isinstance(decision.response, str)
        or not decision.response.strip()
        or len(decision.response) > MAX_TEXT
    ):
        raise HitlError(
            "hitl_response_invalid", "An input request needs a non-empty response.", request_id=row.id
        )
    if row.options and decision.response not in row.options:
        raise HitlError(
            "hitl_response_invalid",
            "The response must be one of the request's options.",
            request_id=row.id,
            options=list(row.options),
        )
    return {
        "status": "answered",
        "approved": False,
        "response": redact(decision.response),
        "admin_notes": clean_notes,
    }
