"""The web inbox at ``/inbox`` of ``baton serve --http``: server-rendered pages to decide requests.

Access is either a session (a browser logs in once with the operator's ``BATON_ADMIN_TOKEN``; an
``Authorization: Bearer`` header with it also works) or a signed single-use link bound to one request.
An agent's credential (``BATON_HTTP_TOKEN``) never opens the inbox: without an admin token, token login
is off. Tokens are never taken
from the query string. Every form carries a CSRF token tied to the session (or link) and the request;
POSTs from another origin are refused; pages are ``no-store`` with a CSP that allows no script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from baton.errors import BatonError, HitlError
from baton.hitl.broker import Decision, HitlBroker, get_broker
from baton.hitl.links import SESSION_TTL_SECONDS, LinkSigner, same
from baton.hitl.sessions import revoke_session, session_revoked
from baton.http_guards import AUTH_FAILED_KEY
from baton.runtime import Runtime

COOKIE = "baton_inbox"
MAX_FORM_BYTES = 64 * 1024
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; "
    "style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
STATUS = {
    "hitl_request_not_found": 404,
    "hitl_request_already_decided": 409,
    "hitl_request_expired": 410,
    "hitl_response_invalid": 400,
    "hitl_link_invalid": 403,
    "hitl_csrf_invalid": 403,
    "hitl_unauthorized": 401,
}


def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["pretty"] = lambda value: json.dumps(value, ensure_ascii=False, indent=2)
    env.filters["when"] = _when
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
        self.env = _templates()

    @property
    def signer(self) -> LinkSigner:
        """The runtime's link, session and CSRF signer."""
        return LinkSigner.for_runtime(self.runtime)

    # rendering and auth ---------------------------------------------------------------------------

    def page(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A rendered page with the inbox's security headers."""
        html = self.env.get_template(template).render(**values)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def refusal(self, exc: BatonError, *, back: str | None = None) -> HTMLResponse:
        """An error page carrying the error class."""
        status = STATUS.get(exc.error_class, 400)
        return self.page(
            "notice.html",
            status,
            title="Not done",
            message=exc.message,
            error_class=exc.error_class,
            back=back,
        )

    @property
    def token(self) -> str | None:
        """The operator's credential, ``BATON_ADMIN_TOKEN``; never the agent's ``BATON_HTTP_TOKEN``."""
        return self.runtime.settings.baton_admin_token

    def binding(self, request: Request) -> str | None:
        """``bearer`` or ``session:<sid>`` when the request is authenticated with the token, else None."""
        if request.scope.get("state", {}).get("baton_admin") is True:
            return (
                "bearer"  # the admin token or an OAuth token with baton:admin (http_identity.ADMIN_SCOPE_KEY)
            )
        token = self.token
        if not token:
            return None
        header = request.headers.get("authorization")
        if header is not None:
            if same(f"Bearer {token}", header):
                return "bearer"
            # a wrong bearer gets the login redirect, and counts as a failed authentication
            request.scope.setdefault("state", {})[AUTH_FAILED_KEY] = True
            return None
        parts = self.signer.session_parts(request.cookies.get(COOKIE))
        if parts is None or session_revoked(self.runtime, parts[0]):
            return None
        return f"session:{parts[0]}"

    def same_origin(self, request: Request) -> bool:
        """Whether a POST came from the inbox's own origin (browsers send Origin and Sec-Fetch-Site)."""
        site = request.headers.get("sec-fetch-site")
        if site is not None:  # set by the browser itself; a page cannot forge it
            return site in ("same-origin", "none")
        origin = request.headers.get("origin")
        if origin in (None, "null"):  # no-referrer pages post Origin: null; the CSRF token still decides
            return True
        allowed = {f"{request.url.scheme}://{request.url.netloc}"}
        if self.runtime.settings.baton_public_url:
            public = urlsplit(self.runtime.settings.baton_public_url)
            allowed.add(f"{public.scheme}://{public.netloc}")
        return origin in allowed

    async def form(self, request: Request) -> dict[str, str]:
        """An urlencoded form body (first value of each field), refused beyond 64 KiB."""
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise HitlError("hitl_response_invalid", "The form is too large.")
        parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        return {key: values[0] for key, values in parsed.items()}

    # token sessions -------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Pending requests of every agent, urgent first, one page (``?cursor=``) at a time."""
        binding = self.binding(request)
        if binding is None:
            return self._login_redirect()
        try:
            page = self.broker.page_pending(INBOX_PAGE, request.query_params.get("cursor") or None)
        except BatonError as exc:
            return self.refusal(exc, back="/inbox")
        return self.page(
            "list.html",
            requests=page.requests,
            total=page.total,
            next_cursor=page.next_cursor,
            csrf=self._logout_csrf(binding),
            live=self.live(),
        )

    def live(self) -> dict[str, int]:
        """What a logged-in page needs to update live: the pending count and the store's version."""
        from baton.hitl.live import state

        return state(self.runtime)

    async def events(self, request: Request) -> Response:
        """The live-update stream of a logged-in page (server-sent events)."""
        if self.binding(request) is None:
            return self.refusal(HitlError("hitl_unauthorized", "Log in first."))
        from baton.hitl.live import stream

        return stream(self.runtime, request, {"Cache-Control": "no-store"})

    async def live_script(self, request: Request) -> Response:
        """The same-origin script behind live updates (the only script the CSP allows)."""
        from baton.hitl.live import script

        return Response(
            script(),
            media_type="text/javascript",
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    async def login_form(self, request: Request) -> Response:
        """The token login form."""
        return self.page("login.html", enabled=bool(self.token), failed=False)

    async def login(self, request: Request) -> Response:
        """Exchange the token for a signed session cookie (HttpOnly, SameSite=Strict, Path=/inbox)."""
        token = self.token
        if not self.same_origin(request):
            return self.refusal(HitlError("hitl_csrf_invalid", "Cross-origin login refused."))
        supplied = (await self.form(request)).get("token", "")
        if not token or not same(token, supplied):  # the 401 counts in http_guards.AuthThrottle
            return self.page("login.html", 401, enabled=bool(token), failed=True)
        response = RedirectResponse("/inbox", status_code=303, headers=HEADERS)
        response.set_cookie(
            COOKIE,
            self.signer.new_session(),
            max_age=SESSION_TTL_SECONDS,
            path="/inbox",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        """End the session: revoked in the store (the cookie is dead everywhere), then forgotten."""
        binding = self.binding(request)
        if binding is not None:
            try:
                self._check_csrf(binding, "logout", (await self.form(request)).get("csrf"), request)
            except HitlError as exc:
                return self.refusal(exc)
            parts = self.signer.session_parts(request.cookies.get(COOKIE))
            if parts is not None:
                revoke_session(self.runtime, *parts)
        response = RedirectResponse("/inbox/login", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path="/inbox")
        return response

    async def detail(self, request: Request) -> Response:
        """One request with its context and the decision form."""
        binding = self.binding(request)
        if binding is None:
            return self._login_redirect()
        request_id = request.path_params["request_id"]
        try:
            view = self.broker.get(request_id)
        except HitlError as exc:
            return self.refusal(exc, back="/inbox")
        action = f"/inbox/requests/{request_id}/decide"
        return self.page(
            "request.html",
            r=view,
            action=action,
            csrf=self.signer.csrf(binding, request_id),
            hidden={},
            back="/inbox",
            live=self.live(),
            live_mode="stay",
        )

    async def decide(self, request: Request) -> Response:
        """Record a decision from a logged-in browser, then show the request again."""
        binding = self.binding(request)
        if binding is None:
            return self.refusal(HitlError("hitl_unauthorized", "Log in with the inbox token first."))
        request_id = request.path_params["request_id"]
        try:
            fields = await self.form(request)
            self._check_csrf(binding, request_id, fields.get("csrf"), request)
            self.broker.respond(request_id, _decision(fields, via="inbox"))
        except HitlError as exc:
            return self.refusal(exc, back=f"/inbox/requests/{request_id}")
        return RedirectResponse(f"/inbox/requests/{request_id}", status_code=303, headers=HEADERS)

    # signed links ---------------------------------------------------------------------------------

    async def link_page(self, request: Request) -> Response:
        """The request a signed link is bound to, with its form (viewing does not spend the link)."""
        try:
            claim = self._claim(dict(request.query_params))
            view = self.broker.get(claim.request_id)
        except HitlError as exc:
            return self.refusal(exc)
        hidden = self.signer.link_params(claim.request_id, claim.expires_epoch, claim.nonce)
        csrf = self.signer.csrf(f"link:{claim.nonce}", claim.request_id)
        return self.page("request.html", r=view, action="/inbox/link", csrf=csrf, hidden=hidden, back=None)

    async def link_decide(self, request: Request) -> Response:
        """Record a decision made through a signed link; the link is spent in the same transaction."""
        try:
            fields = await self.form(request)
            claim = self._claim(fields)
            self._check_csrf(f"link:{claim.nonce}", claim.request_id, fields.get("csrf"), request)
            view = self.broker.respond(
                claim.request_id, _decision(fields, via="link"), spend_link=claim.nonce
            )
        except HitlError as exc:
            return self.refusal(exc)
        return self.page(
            "notice.html",
            title=f"Recorded: {view['status']}",
            message=f"Request {view['request_id']} is {view['status']}. The waiting agent has been told.",
            error_class=None,
            back=None,
        )

    def _claim(self, params: dict[str, str]) -> Any:
        claim = self.signer.verify_link(
            params.get("r", ""), params.get("e", ""), params.get("n", ""), params.get("s", "")
        )
        if self.broker.link_spent(claim.nonce):
            raise HitlError("hitl_link_invalid", "This link was already used.", reason="used")
        return claim

    def _check_csrf(self, binding: str, request_id: str, supplied: str | None, request: Request) -> None:
        if not self.same_origin(request):
            raise HitlError("hitl_csrf_invalid", "The form was posted from another site.")
        if binding != "bearer":  # a bearer header is never sent by a browser on its own
            self.signer.check_csrf(binding, request_id, supplied)

    def _logout_csrf(self, binding: str) -> str:
        return self.signer.csrf(binding, "logout")

    def _login_redirect(self) -> Response:
        return RedirectResponse("/inbox/login", status_code=303, headers=HEADERS)


#: Requests per page of the inbox list.
INBOX_PAGE = 50


def _decision(fields: dict[str, str], *, via: str) -> Decision:
    """A decision from the form's ``action`` (approve, reject, answer, decline)."""
    notes = fields.get("admin_notes", "").strip() or None
    action = fields.get("action")
    if action == "approve":
        return Decision(approved=True, admin_notes=notes, via=via)
    if action in ("reject", "decline"):
        return Decision(approved=False, admin_notes=notes, via=via)
    if action == "answer":
        return Decision(response=fields.get("response", ""), admin_notes=notes, via=via)
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
    ]
