"""The inbox's passkey pages: enrollment through a one-time link, and login with a passkey.

The pages are server-rendered; the ceremony's options travel in a ``data-options`` attribute and the
browser's answer comes back in an ordinary form POST, run by the one same-origin script
``/inbox/static/passkey.js`` (the CSP allows ``script-src 'self'`` and nothing inline).
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.errors import BatonError, HitlError
from baton.hitl.inbox import Inbox
from baton.hitl.inbox_access import HEADERS, read_form, session_response
from baton.http.guards import AUTH_FAILED_KEY
from baton.runtime import Runtime

SCRIPT = Path(__file__).parent / "static" / "passkey.js"


class PasskeyPages:
    """Enrollment and passkey login, over the inbox's rendering and its access (headers and sessions)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.access = inbox.access
        self.runtime = inbox.runtime

    async def script(self, request: Request) -> Response:
        """The WebAuthn ceremony script (same origin, no inline code)."""
        headers = {**HEADERS, "Cache-Control": "no-cache"}
        return Response(SCRIPT.read_bytes(), media_type="text/javascript", headers=headers)

    async def enroll_page(self, request: Request) -> Response:
        """The enrollment page of a valid link: register a passkey for the person it names."""
        from baton.identity.passkeys import Passkeys
        from baton.identity.people import People

        params = dict(request.query_params)
        try:
            person, _nonce = People(self.runtime).check_enrollment(params)
        except BatonError as exc:
            return self.inbox.refusal(exc)
        options, ceremony = Passkeys(self.runtime).registration_options(
            person, self.inbox.relying_party(request)
        )
        link = {key: params[key] for key in ("p", "e", "n", "s")}
        return self.inbox.page(
            "enroll.html",
            person=person,
            options=options,
            ceremony=ceremony,
            link=link,
            passkey_host=self.inbox.passkey_host(request),
        )

    async def enroll(self, request: Request) -> Response:
        """Verify the new passkey, store it and spend the link; then the person logs in with it."""
        from baton.identity.passkeys import Passkeys
        from baton.identity.people import People

        if not self.access.same_origin(request):
            return self.inbox.refusal(HitlError("hitl_csrf_invalid", "Cross-origin enrollment refused."))
        try:
            fields = await read_form(request)
            person, nonce = People(self.runtime).check_enrollment(fields)
            Passkeys(self.runtime).verify_registration(
                person,
                nonce,
                fields.get("ceremony", ""),
                fields.get("credential", ""),
                self.inbox.relying_party(request),
            )
        except BatonError as exc:
            return self.inbox.refusal(exc)
        return self.inbox.page(
            "notice.html",
            title="Passkey registered",
            message=f"{person} can now log in to the inbox with this passkey.",
            next_step="Log in with it on the login page; the enrollment link is spent.",
            error_class=None,
            back="/inbox/login",
        )

    async def login(self, request: Request) -> Response:
        """Exchange a verified passkey assertion for a session bound to its person."""
        from baton.identity.passkeys import Passkeys

        if not self.access.same_origin(request):
            return self.inbox.refusal(HitlError("hitl_csrf_invalid", "Cross-origin login refused."))
        try:
            fields = await read_form(request)
            person, passkey = Passkeys(self.runtime).verify_login(
                fields.get("ceremony", ""), fields.get("credential", ""), self.inbox.relying_party(request)
            )
        except BatonError as exc:
            # counted by http_guards.AuthThrottle, which also answers 429 while this address is locked out
            request.scope.setdefault("state", {})[AUTH_FAILED_KEY] = True
            return self.inbox.refusal(exc, back="/inbox/login")
        self.runtime.receipts.append("inbox_login", {"person": person, "via": "passkey"})
        session = self.access.signer.new_session(person=person, passkey=passkey)
        return session_response(request, session, fields.get("next"))


def passkey_routes(inbox: Inbox) -> list[Route]:
    """The passkey routes of the inbox."""
    pages = PasskeyPages(inbox)
    return [
        Route("/inbox/static/passkey.js", pages.script, methods=["GET"]),
        Route("/inbox/enroll", pages.enroll_page, methods=["GET"]),
        Route("/inbox/enroll", pages.enroll, methods=["POST"]),
        Route("/inbox/login/passkey", pages.login, methods=["POST"]),
    ]


def routes(runtime: Runtime) -> list[Route]:
    """The enrollment and passkey routes for ``baton serve --http`` and ``baton console`` (their own
    provider, so that the inbox module does not import this one)."""
    from baton.hitl.broker import get_broker

    return passkey_routes(Inbox(runtime, get_broker(runtime)))
