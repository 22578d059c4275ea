"""Request records: constants, the typed inputs, the row-to-view mapping and the rules a decision must meet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from baton.errors import HitlError
from baton.store.rows import RowProblemError, RowShape, Screened, finite, load_json, screen

Kind = Literal["approval", "input"]
Status = Literal["pending", "approved", "rejected", "answered", "expired"]
DECIDED: tuple[str, ...] = ("approved", "rejected", "answered")
#: The longest a request may stay open (30 days).
MAX_TIMEOUT_SECONDS = 30 * 86_400
MAX_TEXT = 20_000


@dataclass(frozen=True)
class NewRequest:
    """What an agent asks a human."""

    kind: Kind
    message: str
    context: dict[str, Any] | None = None
    timeout_seconds: int | None = None
    urgent: bool = False
    options: list[str] | None = None
    #: The agent that asks (``baton.identity.agents.Caller.name``); None for the operator's own tools.
    agent: str | None = None
    #: Approvals only: how many distinct people must approve (1 when None).
    required_approvals: int | None = None
    #: Approvals only: an approval needs a fresh passkey assertion bound to the request (step-up).
    step_up: bool = False
    #: The digest a step-up binds; default sha256(canonical JSON of the context).
    arguments_sha256: str | None = None
    #: Who asked and what is at risk, as the server knows it (never from the agent's arguments): ``client``
    #: (``clientInfo.name``), ``subagent_id`` and ``parent_agent``, and for a gateway call approval
    #: ``adapter_id``, ``tool``, ``risk_class`` and the tool's pinned ``annotations``.
    provenance: dict[str, Any] | None = None
    #: The request's own escalation steps (:mod:`baton.escalation_steps`), added to BATON_HITL_ESCALATION's.
    escalation: str | None = None


@dataclass(frozen=True)
class Decision:
    """What a responder submits; ``via`` names the path (passkey, admin_token, cli, link, mcp, mcp_admin,
    elicitation) and ``decided_by`` who (None: the path's default name, see :data:`DEFAULT_DECIDERS`)."""

    approved: bool | None = None
    response: str | None = None
    admin_notes: str | None = None
    via: str = "mcp"
    decided_by: str | None = None
    #: A verified step-up (:class:`baton.identity.passkeys.StepUpProof`) when the decider made one.
    step_up: Any = None
    #: The real uid of a CLI decision (:mod:`baton.identity.os_accounts`): it names the decider (``decided_by`` is
    #: then ignored) and counts once in a quorum.
    os_uid: int | None = None


#: Who stands behind a path when the decision does not name a person.
DEFAULT_DECIDERS: dict[str, str] = {
    "admin_token": "operator",
    "mcp_admin": "operator",
    "link": "link-holder",
    "mcp": "mcp-client",
    "elicitation": "mcp-client",
}
#: Paths whose decider is not a known person: they cannot count toward a quorum of more than one.
ANONYMOUS_PATHS = frozenset({"link", "mcp", "elicitation"})


def decider_name(decision: Decision) -> str:
    """The name recorded as ``decided_by`` for a decision."""
    return decision.decided_by or DEFAULT_DECIDERS.get(decision.via, decision.via)


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
        "notes": _notes(getattr(row, "notes", None)),
        "responded_at": row.responded_at,
        "decided_via": row.decided_via,
        "decided_by": row.decided_by,
        "required_approvals": row.required_approvals or 1,
        "step_up": bool(row.step_up),
        "arguments_sha256": row.arguments_sha256,
        "approvals": [],
        "waiter_gone": row.waiter_gone,
        "agent": row.agent,
        "provenance": _provenance(getattr(row, "provenance", None)),
        "reached_via": row_paths(getattr(row, "reached_via", None)),
    }


def row_paths(value: Any) -> list[str]:
    """The stored paths a request went out on; a damaged value reads as none."""
    try:
        loaded = load_json(value, "reached_via")
    except RowProblemError:
        return []
    return [p for p in loaded if isinstance(p, str)] if isinstance(loaded, list) else []


def _notes(value: Any) -> list[dict[str, str]]:
    """The stored notes of each decider; a damaged value reads as none (``admin_notes`` still holds them)."""
    try:
        loaded = load_json(value, "notes")
    except RowProblemError:
        return []
    if not isinstance(loaded, list):
        return []
    return [n for n in loaded if isinstance(n, dict) and isinstance(n.get("by"), str) and "notes" in n]


def _provenance(value: Any) -> dict[str, Any] | None:
    """The stored provenance; a damaged one reads as unknown (it informs the person, it decides nothing)."""
    try:
        loaded = load_json(value, "provenance")
    except RowProblemError:
        return None
    return loaded if isinstance(loaded, dict) else None


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


def check_approver(runtime: Any, row: Any, decision: Decision, by: str) -> None:
    """Refuse an approval the request's rules forbid: no bound step-up, an anonymous path on a quorum,
    or the asking agent's owner when BATON_HITL_EXCLUDE_OWNER is on."""
    if row.step_up:
        proof = decision.step_up
        bound = (
            proof is not None
            and decision.via == "passkey"
            and proof.request_id == row.id
            and proof.arguments_sha256 == row.arguments_sha256
            and proof.person == by
        )
        if not bound:
            raise HitlError(
                "hitl_step_up_required",
                f"Approving request {row.id} needs a fresh passkey assertion bound to it (step-up), made by "
                "the person approving, in the inbox.",
                request_id=row.id,
            )
    required = row.required_approvals or 1
    if required > 1 and decision.via in ANONYMOUS_PATHS:
        raise HitlError(
            "hitl_decider_not_authorized",
            f"Request {row.id} needs {required} distinct people to approve; a person who logs in decides it.",
            request_id=row.id,
        )
    agent = row._mapping.get("agent")
    if agent and runtime.settings.baton_hitl_exclude_owner and owner_excluded(runtime, str(agent), by):
        raise HitlError(
            "hitl_owner_excluded",
            f"{by} owns the agent {agent} that asked; another person approves request {row.id}.",
            request_id=row.id,
        )


def owner_excluded(runtime: Any, agent: str, person: str) -> bool:
    """Whether ``person`` is a registered owner of ``agent`` (``baton people add NAME --owns AGENT``)."""
    from baton.identity.people import People

    return person in People(runtime).owners_of(agent)
