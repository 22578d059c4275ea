"""The web inbox at ``/inbox`` of ``baton serve --http``: server-rendered pages to decide requests.

Who may open a page or post a form is :mod:`baton.hitl.inbox_access`'s to say (a session, the operator's
bearer token or a signed single-use link; CSRF and origin checks; the security headers). Every decision
records who (``decided_by``) and how (``decided_via``). The CSP lets pages run same-origin files only:
``/inbox/static/passkey.js`` (the WebAuthn ceremonies), ``/inbox/static/live.js`` (live updates) and
``/inbox/static/countdown.js`` (the time left on a request)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from baton.errors import BatonError, HitlError
from baton.hitl import inbox_grant
from baton.hitl.broker import Decision, HitlBroker, get_broker
from baton.hitl.inbox_access import (
    HEADERS,
    InboxAccess,
    Principal,
    logged_out_response,
    login_redirect,
    login_url,
    read_form,
    safe_next,
    session_response,
)
from baton.identity.links import same
from baton.runtime import Runtime

STATUS = {
    "hitl_request_not_found": 404,
    "hitl_request_already_decided": 409,
    "hitl_request_expired": 410,
    "hitl_response_invalid": 400,
    "hitl_link_invalid": 403,
    "hitl_csrf_invalid": 403,
    "hitl_unauthorized": 401,
    "hitl_step_up_required": 403,
    "hitl_approval_duplicate": 409,
    "hitl_owner_excluded": 403,
    "hitl_decider_not_authorized": 403,
    "passkey_invalid": 403,
    "enrollment_link_invalid": 403,
    "person_not_found": 404,
}


def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    from baton.hitl import present

    env.filters.update(present.filters())
    env.filters["when"] = _when
    env.tests["markdownish"] = lambda value: isinstance(value, str) and present.looks_like_markdown(value)
    env.tests["hiding"] = lambda value: isinstance(value, str) and present.hides_text(value)
    env.globals.update(
        who=present.who,
        risk=present.risk,
        arguments=present.arguments,
        extra_context=present.extra_context,
        whole_in_list=present.whole_in_list,
        told_line=present.told,  # not `told`: a page's own `told` value must never fall back to it
    )
    return env


def _when(stamp: str | None) -> str:
    """``2026-12-02T14:21:51.478859+00:00`` as ``2026-12-02 14:21:51 UTC``."""
    if not stamp:
        return ""
    from datetime import UTC, datetime

    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Inbox:
    """The inbox's request handlers over one broker."""

    def __init__(self, runtime: Runtime, broker: HitlBroker) -> None:
        self.runtime = runtime
        self.broker = broker
        self.access = InboxAccess(runtime)
        self.env = _templates()

    # rendering ------------------------------------------------------------------------------------

    def page(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A rendered page with the inbox's security headers."""
        html = self.env.get_template(template).render(**values)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def refusal(self, exc: BatonError, *, back: str | None = None) -> HTMLResponse:
        """An error page carrying the error class, and what to do next (who decided, when someone did)."""
        from baton.hitl.end_pages import refused

        status = STATUS.get(exc.error_class, 400)
        return self.page(
            "notice.html",
            status,
            title="Not done",
            message=exc.message,
            next_step=refused(exc, self._decided(exc)),
            error_class=exc.error_class,
            back=back,
        )

    def _decided(self, exc: BatonError) -> dict[str, Any] | None:
        """The request a refusal says was already decided (its outcome and who decided it), else None."""
        request_id = exc.details.get("request_id")
        if exc.error_class != "hitl_request_already_decided" or not isinstance(request_id, str):
            return None
        try:
            return self.broker.get(request_id)
        except HitlError:
            return None

    # token sessions -------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Pending requests of every agent, urgent first, one page (``?cursor=``) at a time."""
        principal = self.access.principal(request)
        if principal is None:
            return login_redirect(request)
        try:
            page = self.broker.page_pending(INBOX_PAGE, request.query_params.get("cursor") or None)
        except BatonError as exc:
            return self.refusal(exc, back="/inbox")
        return self.page(
            "list.html",
            requests=page.requests,
            total=page.total,
            total_exact=page.total_exact,
            next_cursor=page.next_cursor,
            csrf=self.access.logout_csrf(principal.binding),
            live=self.live(),
            me=principal,
        )

    def live(self) -> dict[str, Any]:
        """What a logged-in page needs to update live: the pending count and the store's version."""
        from baton.hitl.live import state

        return state(self.runtime)

    async def events(self, request: Request) -> Response:
        """The live-update stream of a logged-in page (server-sent events)."""
        if self.access.binding(request) is None:
            return self.refusal(HitlError("hitl_unauthorized", "Log in first."))
        from baton.hitl.live import stream

        return stream(self.runtime, request, {"Cache-Control": "no-store"})

    async def live_script(self, request: Request) -> Response:
        """The same-origin script behind live updates (the CSP allows same-origin scripts only)."""
        from baton.hitl.live import script

        return _script(script())

    async def countdown_script(self, request: Request) -> Response:
        """The same-origin script that keeps a request's time left current."""
        from baton.hitl.live import STATIC

        return _script((STATIC / "countdown.js").read_bytes())

    async def login_form(self, request: Request) -> Response:
        """The login page: a passkey (when anyone enrolled one) and the operator's token (when set)."""
        return self.login_page(request)

    def login_page(
        self, request: Request, status: int = 200, *, failed: bool = False, target: str | None = None
    ) -> HTMLResponse:
        """The login page with a fresh passkey ceremony; a login returns to ``target`` (or ``?next=``)."""
        from baton.identity.people import People

        passkey: dict[str, str] | None = None
        if People(self.runtime).anyone_can_log_in():
            from baton.identity.passkeys import Passkeys

            options, ceremony = Passkeys(self.runtime).login_options(self.relying_party(request))
            passkey = {"options": options, "ceremony": ceremony}
        target = safe_next(target or request.query_params.get("next"))
        return self.page(
            "login.html",
            status,
            enabled=bool(self.access.admin_token),
            passkey=passkey,
            failed=failed,
            next=None if target == "/inbox" else target,
            passkey_host=self.passkey_host(request) if passkey else None,
        )

    def passkey_host(self, request: Request) -> str | None:
        """This page at a host name, when it was opened at an IP address (no WebAuthn relying party)."""
        from baton.identity.public_url import passkey_address

        return passkey_address(str(request.url), self.runtime.settings.baton_public_url)

    def relying_party(self, request: Request) -> Any:
        """The WebAuthn relying party for this request (BATON_PUBLIC_URL, else the Host it came to)."""
        from baton.identity.passkeys import relying_party

        return relying_party(self.runtime.settings.baton_public_url, request.url.scheme, request.url.netloc)

    async def login(self, request: Request) -> Response:
        """Exchange the token for a signed session cookie (HttpOnly, SameSite=Strict, Path=/inbox)."""
        token = self.access.admin_token
        if not self.access.same_origin(request):
            return self.refusal(HitlError("hitl_csrf_invalid", "Cross-origin login refused."))
        fields = await read_form(request)
        if not token or not same(token, fields.get("token", "")):  # counted in http_guards.AuthThrottle
            return self.login_page(request, 401, failed=True, target=fields.get("next"))
        self.runtime.receipts.append("inbox_login", {"person": "operator", "via": "admin_token"})
        return session_response(request, self.access.signer.new_session(), fields.get("next"))

    async def logout(self, request: Request) -> Response:
        """End the session: revoked in the store (the cookie is dead everywhere), then forgotten."""
        binding = self.access.binding(request)
        if binding is not None:
            try:
                self.access.check_csrf(binding, "logout", (await read_form(request)).get("csrf"), request)
            except HitlError as exc:
                return self.refusal(exc)
            self.access.revoke_session(request)
        return logged_out_response()

    async def detail(self, request: Request) -> Response:
        """One request: the decision at the top, then who asked, the risk, the arguments and the context."""
        principal = self.access.principal(request)
        if principal is None:
            return login_redirect(request)
        request_id = request.path_params["request_id"]
        try:
            view = self.broker.get(request_id)
        except HitlError as exc:
            return self.refusal(exc, back="/inbox")
        return self.page(
            "request.html",
            r=view,
            action=f"/inbox/requests/{request_id}/decide",
            csrf=self.access.signer.csrf(principal.binding, request_id),
            hidden={},
            back="/inbox",
            live=self.live(),
            live_mode="stay",
            me=principal,
            grant=inbox_grant.offered(view, principal.via),
            step_up=self.step_up_ceremony(request, principal, view),
            login_link=login_url(f"/inbox/requests/{request_id}")
            if view["step_up"] and principal.via != "passkey"
            else None,
            passkey_host=self.passkey_host(request) if view["step_up"] else None,
        )

    def step_up_ceremony(self, request: Request, principal: Principal, view: dict[str, Any]) -> Any:
        """The passkey ceremony a person logged in with a passkey approves a pending approval with (step-up
        or not: every passkey approval carries its assertion into the receipt)."""
        if not (view["kind"] == "approval" and view["status"] == "pending" and principal.via == "passkey"):
            return None
        from baton.identity.passkeys import Passkeys

        options, ceremony = Passkeys(self.runtime).step_up_options(
            principal.name, view, self.relying_party(request)
        )
        return {"options": options, "ceremony": ceremony}

    async def decide(self, request: Request) -> Response:
        """Record a decision from a logged-in browser, then show the request again."""
        principal = self.access.principal(request)
        if principal is None:
            return self.refusal(HitlError("hitl_unauthorized", "Log in to the inbox first."))
        request_id = request.path_params["request_id"]
        try:
            fields = await read_form(request)
            self.access.check_csrf(principal.binding, request_id, fields.get("csrf"), request)
            granting = fields.get("action") == inbox_grant.ACTION
            chosen = {**fields, "action": "approve"} if granting else fields
            decision = _decision(chosen, via=principal.via, decided_by=principal.name)
            # every passkey approval carries its assertion (into the receipt); the operator's carries none
            if decision.approved is True and (fields.get("credential") or principal.via == "passkey"):
                decision = replace(decision, step_up=self._step_up(request, principal, request_id, fields))
            if granting:
                inbox_grant.approve(self.runtime, self.broker, request_id, principal, decision, fields)
            else:
                self.broker.respond(request_id, decision)
        except BatonError as exc:
            return self.refusal(exc, back=f"/inbox/requests/{request_id}")
        return RedirectResponse(f"/inbox/requests/{request_id}", status_code=303, headers=HEADERS)

    def _step_up(
        self, request: Request, principal: Principal, request_id: str, fields: dict[str, str]
    ) -> Any:
        """The verified step-up a passkey approval carries (the request's digest is read from the store)."""
        from baton.identity.passkeys import Passkeys

        if principal.via != "passkey":
            raise HitlError(
                "hitl_step_up_required", "A step-up is made by a person logged in with a passkey."
            )
        if not fields.get("credential"):
            raise HitlError(
                "hitl_step_up_required",
                f"A passkey approval of request {request_id} is a fresh passkey assertion bound to it: "
                "use Approve with passkey.",
                request_id=request_id,
            )
        return Passkeys(self.runtime).verify_step_up(
            principal.name,
            self.broker.get(request_id),
            fields.get("ceremony", ""),
            fields.get("credential", ""),
            self.relying_party(request),
        )

    # signed links ---------------------------------------------------------------------------------

    async def link_page(self, request: Request) -> Response:
        """The request a signed link is bound to, with its form (viewing does not spend the link)."""
        try:
            claim = self._claim(dict(request.query_params))
            view = self.broker.get(claim.request_id)
        except HitlError as exc:
            return self.refusal(exc)
        hidden = self.access.signer.link_params(claim.request_id, claim.expires_epoch, claim.nonce)
        csrf = self.access.signer.csrf(f"link:{claim.nonce}", claim.request_id)
        # a step-up or a quorum is decided by a person logged in with a passkey: the request's own page,
        # behind a login that comes back to it
        person_only = view["step_up"] or view["required_approvals"] > 1
        login_link = login_url(f"/inbox/requests/{claim.request_id}") if person_only else None
        return self.page(
            "request.html",
            r=view,
            action="/inbox/link",
            csrf=csrf,
            hidden=hidden,
            back=None,
            login_link=login_link,
        )

    async def link_decide(self, request: Request) -> Response:
        """Record a decision made through a signed link; the link is spent in the same transaction."""
        try:
            fields = await read_form(request)
            claim = self._claim(fields)
            self.access.check_csrf(f"link:{claim.nonce}", claim.request_id, fields.get("csrf"), request)
            view = self.broker.respond(
                claim.request_id, _decision(fields, via="link"), spend_link=claim.nonce
            )
        except HitlError as exc:
            return self.refusal(exc)
        from baton.hitl.end_pages import after, outcome
        from baton.hitl.present import told

        return self.page(
            "notice.html",
            title=f"Recorded: {'your approval counted' if view['status'] == 'pending' else view['status']}",
            message=outcome(view),
            next_step=after(view),
            told=told(view),
            waiter_told=view["waiter_gone"] is False,
            error_class=None,
            back=None,
        )

    def _claim(self, params: dict[str, str]) -> Any:
        claim = self.access.signer.verify_link(
            params.get("r", ""), params.get("e", ""), params.get("n", ""), params.get("s", "")
        )
        if self.broker.link_spent(claim.nonce):
            raise HitlError("hitl_link_invalid", "This link was already used.", reason="used")
        return claim


#: Requests per page of the inbox list.
INBOX_PAGE = 50


def _script(body: bytes) -> Response:
    return Response(
        body,
        media_type="text/javascript",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


def _decision(fields: dict[str, str], *, via: str, decided_by: str | None = None) -> Decision:
    """A decision from the form's ``action`` (approve, reject, answer, decline)."""
    notes = fields.get("admin_notes", "").strip() or None
    action = fields.get("action")
    if action == "approve":
        return Decision(approved=True, admin_notes=notes, via=via, decided_by=decided_by)
    if action in ("reject", "decline"):
        return Decision(approved=False, admin_notes=notes, via=via, decided_by=decided_by)
    if action == "answer":
        return Decision(
            response=fields.get("response", ""), admin_notes=notes, via=via, decided_by=decided_by
        )
    raise HitlError("hitl_response_invalid", "The form did not say approve, reject or answer.")


def routes(runtime: Runtime) -> list[Route]:
    """The inbox's routes for ``baton serve --http``."""
    inbox = Inbox(runtime, get_broker(runtime))
    return [
        Route("/inbox", inbox.index, methods=["GET"]),
        Route("/inbox/login", inbox.login_form, methods=["GET"]),
        Route("/inbox/login", inbox.login, methods=["POST"]),
        Route("/inbox/logout", inbox.logout, methods=["POST"]),
        Route("/inbox/requests/{request_id}", inbox.detail, methods=["GET"]),
        Route("/inbox/requests/{request_id}/decide", inbox.decide, methods=["POST"]),
        Route("/inbox/link", inbox.link_page, methods=["GET"]),
        Route("/inbox/link", inbox.link_decide, methods=["POST"]),
        Route("/inbox/events", inbox.events, methods=["GET"]),
        Route("/inbox/static/live.js", inbox.live_script, methods=["GET"]),
        Route("/inbox/static/countdown.js", inbox.countdown_script, methods=["GET"]),
    ]
