"""Who a request to the web inbox comes from, whether its form is really theirs, and the session cookie.

Access is a session bound to who logged in — a person with a passkey (:mod:`baton.hitl.enroll`), or the
operator with ``BATON_ADMIN_TOKEN`` (form or ``Authorization: Bearer``, the break-glass) — or a signed
single-use link bound to one request. An agent's credential (``BATON_HTTP_TOKEN``) never opens the inbox.
Tokens are never taken from the query string. Every form carries a CSRF token tied to the session (or link)
and the request; POSTs from another origin are refused. Every page and redirect carries :data:`HEADERS`:
``no-store`` and a CSP whose only scripts are same-origin files. The inbox (:mod:`baton.hitl.inbox`), its
passkey pages and the console ask this module; none of them decides access on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from baton.errors import HitlError
from baton.http.guards import AUTH_FAILED_KEY
from baton.identity.callers import ADMIN_SCOPE_KEY
from baton.identity.links import SESSION_TTL_SECONDS, LinkSigner, same
from baton.identity.sessions import revoke_session, session_revoked
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


@dataclass(frozen=True)
class Principal:
    """Who a request to the inbox comes from: the CSRF binding, the name decisions record, and the path."""

    binding: str
    name: str
    via: str


class InboxAccess:
    """The inbox's access checks over one runtime: who is asking, and whether a POST is really theirs."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def signer(self) -> LinkSigner:
        """The runtime's link, session and CSRF signer."""
        return LinkSigner.for_runtime(self.runtime)

    @property
    def admin_token(self) -> str | None:
        """The operator's credential, ``BATON_ADMIN_TOKEN``; never the agent's ``BATON_HTTP_TOKEN``."""
        return self.runtime.settings.baton_admin_token

    def binding(self, request: Request) -> str | None:
        """``bearer`` or ``session:<sid>`` when the request is authenticated, else None."""
        principal = self.principal(request)
        return principal.binding if principal is not None else None

    def principal(self, request: Request) -> Principal | None:
        """The operator (admin token: bearer or token session), a person (passkey session), or None."""
        operator = ("operator", "admin_token")
        if request.scope.get("state", {}).get(ADMIN_SCOPE_KEY) is True:
            return Principal("bearer", *operator)  # admin token or OAuth baton:admin
        token = self.admin_token
        header = request.headers.get("authorization")
        if header is not None:
            if token and same(f"Bearer {token}", header):
                return Principal("bearer", *operator)
            # a wrong bearer gets the login redirect, and counts as a failed authentication
            request.scope.setdefault("state", {})[AUTH_FAILED_KEY] = True
            return None
        parts = self.signer.session_parts(request.cookies.get(COOKIE))
        if parts is None or session_revoked(self.runtime, parts[0]):
            return None
        person = LinkSigner.session_person(parts[0])
        if person is None:
            return Principal(f"session:{parts[0]}", *operator) if token else None
        from baton.identity.people import People

        people = People(self.runtime)
        added = people.added_epoch(person)
        # removed since (and maybe a namesake added), or the passkey it was opened with revoked: the
        # session ended with them
        passkey = LinkSigner.session_passkey(parts[0])
        if added is None or parts[1] - SESSION_TTL_SECONDS < int(added) or not people.holds(person, passkey):
            return None
        return Principal(f"session:{parts[0]}", person, "passkey")

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

    def check_csrf(self, binding: str, scope: str, supplied: str | None, request: Request) -> None:
        """Refuse a POST from another origin, or one without the CSRF token of ``binding`` and ``scope``."""
        if not self.same_origin(request):
            raise HitlError("hitl_csrf_invalid", "The form was posted from another site.")
        if binding != "bearer":  # a bearer header is never sent by a browser on its own
            self.signer.check_csrf(binding, scope, supplied)

    def logout_csrf(self, binding: str) -> str:
        """The CSRF token of the logout form of ``binding``'s pages."""
        return self.signer.csrf(binding, "logout")

    def revoke_session(self, request: Request) -> None:
        """End the request's session cookie in the store, so it is dead on every replica."""
        parts = self.signer.session_parts(request.cookies.get(COOKIE))
        if parts is not None:
            revoke_session(self.runtime, *parts)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form body (first value of each field), refused beyond 64 KiB."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HitlError("hitl_response_invalid", "The form is too large.")
    parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {key: values[0] for key, values in parsed.items()}


def safe_next(target: str | None) -> str:
    """Where a login may send the browser on: a path under ``/inbox`` of this origin, else ``/inbox``
    (an absolute URL, ``//host``, a backslash or a control character would be an open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/inbox"
    if "\\" in target or any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
        return "/inbox"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not (parts.path == "/inbox" or parts.path.startswith("/inbox/")):
        return "/inbox"
    return target


def session_response(request: Request, cookie: str, target: str | None = None) -> Response:
    """To ``target`` (checked by :func:`safe_next`) with a new session cookie (HttpOnly, SameSite=Strict,
    Path=/inbox)."""
    response = RedirectResponse(safe_next(target), status_code=303, headers=HEADERS)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=SESSION_TTL_SECONDS,
        path="/inbox",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def logged_out_response() -> Response:
    """To the login page with the session cookie deleted."""
    response = RedirectResponse("/inbox/login", status_code=303, headers=HEADERS)
    response.delete_cookie(COOKIE, path="/inbox")
    return response


def login_url(target: str) -> str:
    """The login page that returns to ``target`` once logged in."""
    target = safe_next(target)
    return "/inbox/login" if target == "/inbox" else f"/inbox/login?next={quote(target, safe='/')}"


def login_redirect(request: Request | None = None) -> Response:
    """To the login page (a page asked for without a login), which returns to that page afterwards."""
    target = "/inbox"
    if request is not None:
        query = request.url.query
        target = request.url.path + (f"?{query}" if query else "")
    return RedirectResponse(login_url(target), status_code=303, headers=HEADERS)
