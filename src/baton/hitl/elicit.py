"""An optional extra channel: ask the MCP client's own user via elicitation (off by default).

Enabled with ``BATON_HITL_ELICITATION=true`` and used only when the client declared elicitation. Two modes:

* ``url`` — when the client declared URL-mode elicitation and ``BATON_PUBLIC_URL`` names the HTTP server a
  person's browser can reach: the client is asked to open the request's inbox page
  (``/inbox/requests/ID``), which requires the person to log in. It is never a pre-authenticated link (the
  2026-07-28 spec forbids one): ``accept`` means only that the user consented to open it, and decides
  nothing; the person decides in the inbox. Each such elicitation has its own
  ``elicitationId`` (``<request_id>.<random>``); once the request is decided, the waiting call sends
  ``notifications/elicitation/complete`` for it.
* ``form`` — otherwise, when the client declared form elicitation (an empty capability predates modes and
  means form), and only for an *input* request (a question): the client shows a form and an accepted,
  well-formed answer is the answer (``decided_via="elicitation"``, receipted with the agent's name). It is
  the client's word, not a person's proof: the agent's own client code answers the elicitation, so a form
  never approves or rejects an approval request or a gated gateway call, and is offered only on the
  agent's own request and never on one that needs a quorum or a step-up (:func:`may_elicit`).

Two eras: on a 2025-11-25 connection the server sends ``elicitation/create`` on the call's own stream (this
module); on a 2026-07-28 connection there is no back-channel and :mod:`baton.hitl.mrtr` returns an
``InputRequiredResult`` instead. Either way elicitation runs beside the other channels, never instead of
them: a declined, cancelled, failed or malformed elicitation leaves the request pending.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import mcp_types as types

from baton.boundary.toolkit import CallContext
from baton.config import Settings
from baton.errors import BatonError
from baton.hitl.broker import HitlBroker
from baton.hitl.mrtr import decision_from_answer
from baton.identity.public_url import request_page

log = logging.getLogger("baton.hitl")

#: Any non-None value routes the elicitation on the tool call's own stream (see ServerSession.send_request).
_REQUEST_SCOPED = "hitl-call"


def elicitation_mode(settings: Settings, ctx: CallContext) -> str | None:
    """``url``, ``form`` or None (no elicitation) for this call."""
    if not settings.baton_hitl_elicitation:
        return None
    capability = getattr(ctx.client_capabilities, "elicitation", None)
    if capability is None:
        return None
    if capability.url is not None and settings.baton_public_url:
        return "url"
    if capability.form is not None or capability.url is None:
        return "form"
    return None


def elicitation_wanted(settings: Settings, ctx: CallContext) -> bool:
    """Whether to open the back-channel elicitation for this call (2025-11-25 era only)."""
    from baton.hitl.mrtr import modern_era

    if ctx.session is None or modern_era(ctx.protocol_version):
        return False
    if settings.baton_http_stateless:  # the client's answer would reach another transport: no back-channel
        return False
    return elicitation_mode(settings, ctx) is not None


def may_elicit(view: dict[str, Any], ctx: CallContext, mode: str | None) -> bool:
    """Whether this caller's client may be asked in ``mode`` (and its form answer count) for this request.

    Only for the agent's own request, never for one that needs a quorum or a step-up, and a form only for
    an input request: a client's answer is the agent's own word, not a person's proof, so it may answer a
    question but never decide an approval (a URL only points a person at the inbox, where they decide).
    """
    if mode is None or not ctx.agent.owns(view.get("agent")):
        return False
    if mode == "form" and view.get("kind") != "input":
        return False
    return int(view.get("required_approvals") or 1) <= 1 and not view.get("step_up")


def requested_schema(view: dict[str, Any]) -> dict[str, Any]:
    """The form shown to the client's user (input requests only: see :func:`may_elicit`)."""
    answer: dict[str, Any] = {"type": "string", "title": "Answer"}
    if view["options"]:
        answer["enum"] = list(view["options"])
    return {"type": "object", "properties": {"response": answer}, "required": ["response"]}


def prompt_text(view: dict[str, Any]) -> str:
    """The message shown to the client's user: the request id, the question and its context."""
    text = f"[{view['request_id']}] {view['message']}"
    if view["context"]:
        text += "\n\nContext:\n" + json.dumps(view["context"], ensure_ascii=False, indent=2)
    return text


def url_prompt_text(view: dict[str, Any]) -> str:
    """The message shown beside a URL elicitation."""
    return f"[{view['request_id']}] Log in to the baton inbox to decide: {view['message']}"


def elicit_request(broker: HitlBroker, view: dict[str, Any], mode: str) -> types.ElicitRequest | None:
    """The embedded elicitation of an ``InputRequiredResult`` (None when there is no inbox URL)."""
    if mode == "url":
        link = request_page(broker.runtime, view["request_id"])
        if link is None:
            return None
        return types.ElicitRequest(
            params=types.ElicitRequestURLParams(message=url_prompt_text(view), url=link)
        )
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=prompt_text(view), requested_schema=requested_schema(view)
        )
    )


def record_answer(broker: HitlBroker, view: dict[str, Any], action: str, content: Any) -> None:
    """Record an elicited form answer as a decision when it is one (the first decision still wins)."""
    decision = decision_from_answer(view, action, content)
    if decision is None:
        return
    try:
        broker.respond(view["request_id"], decision)
    except BatonError as exc:
        log.info("elicited decision for %s not recorded: %s", view["request_id"], exc.error_class)


def new_elicitation_id(request_id: str) -> str:
    """A fresh ``elicitationId`` for one URL elicitation: unique per elicitation (a resumed wait asks again
    under a new id), and naming its request before the first ``.`` (see :func:`request_of`)."""
    return f"{request_id}.{secrets.token_hex(8)}"


def request_of(elicitation_id: str) -> str:
    """The request an elicitation id was made for."""
    return elicitation_id.split(".", 1)[0]


async def elicit_decision(
    broker: HitlBroker, view: dict[str, Any], ctx: CallContext, sent: list[str] | None = None
) -> None:
    """Ask once over the back-channel; a URL elicitation only points the person at the inbox (its id is
    appended to ``sent``, so the waiting call can announce its completion)."""
    mode = elicitation_mode(broker.runtime.settings, ctx)
    try:
        if mode == "url":
            link = request_page(broker.runtime, view["request_id"])
            if link is not None:
                elicitation_id = new_elicitation_id(view["request_id"])
                if sent is not None:
                    sent.append(elicitation_id)
                await ctx.session.elicit_url(
                    url_prompt_text(view), link, elicitation_id, related_request_id=_REQUEST_SCOPED
                )
                return  # accept decides nothing: the person logs in to the inbox, and that wakes the waiter
        answer = await ctx.session.elicit_form(
            prompt_text(view), requested_schema(view), related_request_id=_REQUEST_SCOPED
        )
    except Exception:  # a client that fails to elicit simply leaves the other channels
        log.info("elicitation for %s failed", view["request_id"], exc_info=True)
        return
    record_answer(broker, view, answer.action, answer.content)


async def announce_completion(ctx: CallContext, sent: list[str], status: str) -> None:
    """``notifications/elicitation/complete`` for the URL elicitations of a request that is now decided."""
    if status in ("pending", "expired"):
        return
    for elicitation_id in sent:
        try:
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=_REQUEST_SCOPED)
        except Exception:  # a client gone away: the decision stands either way
            log.info("elicitation completion for %s not delivered", elicitation_id, exc_info=True)
