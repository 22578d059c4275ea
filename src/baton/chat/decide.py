"""A press of Approve or Reject in chat, decided through the broker under the person it maps to.

The press names a chat user and a request. The user must be linked to a person
(:mod:`baton.identity.chat_identities`); the request must be one that one person decides without a passkey
step-up. Otherwise nothing is decided and the presser gets the request's inbox page, where a login
is needed. A decision is the broker's, exactly like an inbox one (first decision wins, the owner rule,
expiry), receipted ``hitl_decided`` with ``decided_by`` the person and ``decided_via`` the platform;
every press, decided or not, leaves a ``chat_action`` receipt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from baton.errors import BatonError, HitlError
from baton.hitl.broker import Decision, get_broker
from baton.identity.chat_identities import ChatIdentities, ChatIdentity
from baton.identity.public_url import request_page
from baton.runtime import Runtime

log = logging.getLogger("baton.chat")

PLATFORM_NAMES = {"slack": "Slack", "telegram": "Telegram"}


@dataclass(frozen=True)
class ChatOutcome:
    """What a press did: ``decided``, ``link`` (go to the inbox, nothing decided) or ``refused``."""

    kind: Literal["decided", "link", "refused"]
    #: One sentence for the presser (an ephemeral reply or a callback answer).
    text: str
    #: For a decision: the line that replaces the buttons on the message.
    outcome_line: str | None = None
    error_class: str | None = None
    view: dict[str, Any] | None = None


def _go_to_inbox(runtime: Runtime, request_id: str, reason: str) -> str:
    page = request_page(runtime, request_id)
    where = f"open {page}" if page else f"use `baton hitl approve|reject {request_id}`"
    return f"{reason} Nothing was decided here; {where} to decide."


def _state_line(view: dict[str, Any]) -> str:
    """A decided or expired request, truthfully: what, by whom, how."""
    if view["status"] == "expired":
        return f"Request {view['request_id']} expired undecided."
    via = view.get("decided_via") or "?"
    return f"Request {view['request_id']} was already {view['status']} by {view.get('decided_by')} ({via})."


class ChatDecider:
    """Turns a verified press into a decision, a link to the inbox, or a refusal; never raises."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.broker = get_broker(runtime)

    def press(self, identity: ChatIdentity, request_id: str, approve: bool) -> ChatOutcome:
        """Decide ``request_id`` for the person ``identity`` is linked to, when a chat press may."""
        try:
            outcome = self._press(identity, request_id, approve)
        except BatonError as exc:
            outcome = ChatOutcome("refused", exc.message, error_class=exc.error_class)
        except Exception:  # a press must never take the route down or decide half-way
            log.exception("a chat press on %s failed", request_id)
            outcome = ChatOutcome(
                "refused", "baton could not record this; nothing was decided.", error_class="internal_error"
            )
        self._receipt(identity, request_id, approve, outcome)
        return outcome

    def _press(self, identity: ChatIdentity, request_id: str, approve: bool) -> ChatOutcome:
        platform = PLATFORM_NAMES[identity.platform]
        person = ChatIdentities(self.runtime).person_for(identity)
        if person is None:
            reason = f"Your {platform} account is not linked to a person who decides in baton."
            return ChatOutcome(
                "link", _go_to_inbox(self.runtime, request_id, reason), error_class="chat_identity_not_found"
            )
        view = self.broker.get(request_id)
        if view["status"] != "pending":
            return ChatOutcome("refused", _state_line(view), error_class=_state_class(view), view=view)
        if view["kind"] != "approval":
            reason = "This request wants a typed answer."
            return ChatOutcome("link", _go_to_inbox(self.runtime, request_id, reason), view=view)
        if view["step_up"] or view["required_approvals"] > 1:
            reason = (
                "This approval needs a passkey step-up."
                if view["step_up"]
                else f"This approval needs {view['required_approvals']} different people."
            )
            return ChatOutcome("link", _go_to_inbox(self.runtime, request_id, reason), view=view)
        decision = Decision(approved=approve, via=identity.platform, decided_by=person)
        try:
            decided = self.broker.respond(request_id, decision)
        except HitlError as exc:
            if exc.error_class in ("hitl_request_already_decided", "hitl_request_expired"):
                view = self.broker.get(request_id)
                return ChatOutcome("refused", _state_line(view), error_class=exc.error_class, view=view)
            raise
        line = f"{decided['status'].capitalize()} by {person} in {platform}."
        return ChatOutcome(
            "decided", f"Recorded: request {request_id} is {decided['status']}.", line, view=decided
        )

    def _receipt(self, identity: ChatIdentity, request_id: str, approve: bool, outcome: ChatOutcome) -> None:
        """``chat_action``: who pressed what on which request, and what came of it."""
        person = ChatIdentities(self.runtime).person_for(identity)
        try:
            self.runtime.receipts.append(
                "chat_action",
                {
                    "platform": identity.platform,
                    "user_id": identity.user_id,
                    "person": person,
                    "request_id": request_id,
                    "action": "approve" if approve else "reject",
                    "outcome": outcome.kind,
                    "error_class": outcome.error_class,
                },
            )
        except BatonError:
            log.exception("chat_action receipt refused")


def _state_class(view: dict[str, Any]) -> str:
    return "hitl_request_expired" if view["status"] == "expired" else "hitl_request_already_decided"
