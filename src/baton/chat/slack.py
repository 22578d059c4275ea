"""Slack's interactive callback: a signed ``block_actions`` payload, verified, then decided or linked.

Slack POSTs ``application/x-www-form-urlencoded`` with one field, ``payload`` (JSON), and signs the raw
body: ``X-Slack-Signature: v0=HMAC-SHA256(SLACK_SIGNING_SECRET, "v0:" + X-Slack-Request-Timestamp + ":" +
body)``. The signature is checked by ``slack_sdk.signature.SignatureVerifier``; a timestamp more than
five minutes from this server's clock is refused first (``chat_request_stale``: a replayed capture),
any other failure is ``chat_signature_invalid``; both answer 401 and decide nothing. A verified press is
decided by :class:`baton.chat.decide.ChatDecider`; the answer goes back to the interaction's
``response_url`` after the 200 (Slack wants its acknowledgement within three seconds): the message with
its buttons replaced by who decided, or an ephemeral reply with the inbox page to the presser alone.
With ``SLACK_TEAM_ID`` set, a press from any other workspace is refused (403 ``chat_team_not_allowed``)
before anyone is looked up: an app installed in several workspaces shares one signing secret.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import parse_qs

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from baton import clock
from baton.chat.decide import ChatDecider, ChatOutcome
from baton.chat.http import refuse
from baton.errors import ChatError
from baton.identity.chat_identities import USER_ID_PATTERNS, ChatIdentity
from baton.notify import slack_app
from baton.runtime import Runtime

log = logging.getLogger("baton.chat")

#: Slack's own replay window: a request signed more than five minutes ago (or ahead) is refused.
MAX_SKEW_SECONDS = 300
REQUEST_ID = re.compile(r"^hr_[0-9a-f]{1,36}$")
RESPONSE_TIMEOUT_SECONDS = 10.0
FOREIGN_TEAM = "This Slack workspace is not one SLACK_TEAM_ID allows; nothing was decided."


def verify(secret: str, body: bytes, timestamp: str, signature: str, now: float) -> None:
    """Refuse a stale or badly signed callback (``chat_request_stale``, ``chat_signature_invalid``)."""
    from slack_sdk.signature import SignatureVerifier

    if not (timestamp.isascii() and timestamp.isdigit()) or abs(now - int(timestamp)) > MAX_SKEW_SECONDS:
        raise ChatError(
            "chat_request_stale",
            "The Slack request's timestamp is missing or more than five minutes off; nothing was decided.",
        )
    if not signature or not SignatureVerifier(secret).is_valid(body, timestamp, signature):
        raise ChatError("chat_signature_invalid", "The Slack signature does not verify; nothing was decided.")


def parse(body: bytes) -> dict[str, Any]:
    """The ``payload`` JSON of a form body (``chat_payload_invalid`` when there is none)."""
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=False)
        payload = json.loads(fields["payload"][0])
    except (UnicodeDecodeError, KeyError, IndexError, ValueError):
        raise ChatError("chat_payload_invalid", "The Slack callback carries no JSON payload.") from None
    if not isinstance(payload, dict):
        raise ChatError("chat_payload_invalid", "The Slack callback's payload is not an object.")
    return payload


def baton_press(payload: dict[str, Any]) -> tuple[ChatIdentity, str, bool] | None:
    """``(presser, request_id, approve)`` of a press on a baton button; None for any other interaction."""
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    press = next(
        (a for a in actions or [] if isinstance(a, dict) and a.get("action_id") in slack_app.ACTIONS),
        None,
    )
    if press is None:
        return None
    user = payload.get("user")
    user_id = user.get("id") if isinstance(user, dict) else None
    request_id = press.get("value")
    if not isinstance(user_id, str) or not USER_ID_PATTERNS["slack"].match(user_id):
        raise ChatError("chat_payload_invalid", "The Slack callback names no valid user.")
    if not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
        raise ChatError("chat_payload_invalid", "The Slack button carries no request id.")
    return ChatIdentity("slack", user_id), request_id, slack_app.ACTIONS[press["action_id"]]


def team_allowed(teams: frozenset[str], payload: dict[str, Any]) -> bool:
    """Whether the presser's workspace (``user.team_id``, else ``team.id``) or the payload's Enterprise Grid
    organization (``enterprise.id``) is one of ``teams``; with no ``teams`` (SLACK_TEAM_ID unset), any is."""
    if not teams:
        return True
    user, team, enterprise = (payload.get(key) for key in ("user", "team", "enterprise"))
    presser_team = user.get("team_id") if isinstance(user, dict) else None
    if presser_team is None and isinstance(team, dict):
        presser_team = team.get("id")
    organization = enterprise.get("id") if isinstance(enterprise, dict) else None
    return presser_team in teams or organization in teams


def reply(payload: dict[str, Any], outcome: ChatOutcome) -> dict[str, Any]:
    """What goes to ``response_url``: the updated message, or an ephemeral note to the presser."""
    settled = outcome.view is not None and outcome.view.get("status") != "pending"
    line = outcome.outcome_line if outcome.kind == "decided" else outcome.text
    message = payload.get("message")
    blocks = message.get("blocks") if isinstance(message, dict) else None
    if settled and line and isinstance(blocks, list):
        kept = [block for block in blocks if isinstance(block, dict) and block.get("type") != "actions"]
        context = {"type": "context", "elements": [{"type": "mrkdwn", "text": slack_app.mrkdwn_escape(line)}]}
        return {"replace_original": True, "text": line, "blocks": [*kept, context]}
    return {"response_type": "ephemeral", "replace_original": False, "text": outcome.text}


class SlackActions:
    """``POST /chat/slack/actions``: Slack's interactivity request URL."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.decider = ChatDecider(runtime)

    async def handle(self, request: Request) -> Response:
        """Verify, decide (or link), acknowledge; the reply follows on ``response_url``."""
        settings = self.runtime.settings
        if not settings.slack_signing_secret:
            return refuse(request, 404, ChatError("chat_not_configured", "Slack callbacks are off here."))
        body = await request.body()
        try:
            verify(
                settings.slack_signing_secret,
                body,
                request.headers.get("x-slack-request-timestamp", ""),
                request.headers.get("x-slack-signature", ""),
                clock.time(),
            )
        except ChatError as exc:
            return refuse(request, 401, exc, auth_failed=True)
        try:
            payload = parse(body)
            press = baton_press(payload)
        except ChatError as exc:
            return refuse(request, 400, exc)
        if press is None:
            return Response(status_code=200)  # another interaction (a link button, a shortcut): not ours
        if not team_allowed(settings.slack_teams, payload):
            log.warning("a Slack press from a workspace outside SLACK_TEAM_ID was refused")
            return refuse(request, 403, ChatError("chat_team_not_allowed", FOREIGN_TEAM))
        outcome = self.decider.press(*press)
        url = payload.get("response_url")
        if not isinstance(url, str) or not slack_app.response_url_allowed(settings, url):
            return Response(status_code=200)
        return Response(
            status_code=200, background=BackgroundTask(self._respond, url, reply(payload, outcome))
        )

    def _respond(self, url: str, body: dict[str, Any]) -> None:
        try:
            status = slack_app.respond(url, self.runtime.redactor.value(body), RESPONSE_TIMEOUT_SECONDS)
        except OSError as exc:
            log.warning("the Slack response_url could not be reached (%s)", type(exc).__name__)
            return
        if status >= 300:
            log.warning("the Slack response_url answered HTTP %s", status)
