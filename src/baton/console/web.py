"""The console's routes under ``/inbox/console``, behind the inbox's authentication.

Nothing about access is reimplemented here: the inbox's :class:`~baton.hitl.inbox_access.InboxAccess`
decides who is logged in (token session cookie, ``Path=/inbox``, or a bearer header) and checks every
form's CSRF token and origin; pages render with its security headers (no script, no remote resource).
Decisions go through the inbox's own decide handler, so the console is one more view of the same
paths (``decided_by`` the logged-in person or ``operator``; ``decided_via`` ``passkey`` or ``admin_token``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from baton.console import charts, views
from baton.errors import BatonError, HitlError
from baton.hitl import inbox_grant
from baton.hitl.broker import get_broker
from baton.hitl.inbox import Inbox
from baton.hitl.inbox_access import HEADERS as INBOX_HEADERS
from baton.hitl.inbox_access import login_redirect, read_form
from baton.runtime import Runtime

BASE = "/inbox/console"
#: The inbox's headers: the one script a console page loads is the same-origin ``/inbox/static/live.js``
#: (live updates); no inline script, no eval, nothing remote.
HEADERS = INBOX_HEADERS
PAGES = (
    ("requests", "Requests"),
    ("subagents", "Subagents"),
    ("timers", "Timers"),
    ("adapters", "Adapters"),
    ("grants", "Grants"),
    ("receipts", "Receipts"),
    ("charts", "Charts"),
)


def _signed_in(
    page: Callable[[Console, Request, str], Awaitable[Response]],
) -> Callable[[Console, Request], Awaitable[Response]]:
    """A page only a logged-in person sees (it is given their session binding); anyone else is sent to
    the login page."""

    @wraps(page)
    async def shown(console: Console, request: Request) -> Response:
        binding = console.access.binding(request)
        if binding is None:
            return login_redirect(request)
        return await page(console, request, binding)

    return shown


class Console:
    """The console's handlers; authentication, CSRF and headers are the inbox's."""

    def __init__(self, runtime: Runtime, inbox: Inbox) -> None:
        self.runtime = runtime
        self.inbox = inbox
        self.access = inbox.access
        self.env = inbox.env.overlay()
        from jinja2 import ChoiceLoader, FileSystemLoader

        assert inbox.env.loader is not None
        self.env.loader = ChoiceLoader(
            [FileSystemLoader(Path(__file__).parent / "templates"), inbox.env.loader]
        )

    def page(self, template: str, page: str, binding: str, **values: Any) -> HTMLResponse:
        """A console page with the inbox's security headers."""
        values.setdefault("live", self.inbox.live())
        html = self.env.get_template(template).render(
            pages=PAGES,
            current=page,
            base=BASE,
            logout_csrf=self.access.logout_csrf(binding),
            **values,
        )
        return HTMLResponse(html, headers=HEADERS)

    def csrf(self, binding: str, scope: str) -> str:
        """The CSRF token of one console form (tied to the session and what the form acts on)."""
        return self.access.signer.csrf(binding, scope)

    # pages ----------------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        """The console opens on the requests page."""
        return RedirectResponse(f"{BASE}/requests", status_code=303, headers=HEADERS)

    @_signed_in
    async def requests(self, request: Request, binding: str) -> Response:
        """Pending requests to decide, and the decided ones with who, how, notes, wait and receipt."""
        data = views.requests(self.runtime)
        forms = {r["request_id"]: self.csrf(binding, r["request_id"]) for r in data["pending"]}
        signs = self._signs(request)
        return self.page("console_requests.html", "requests", binding, forms=forms, signs=signs, **data)

    def _signs(self, request: Request) -> bool:
        """Whether the viewer approves with a passkey assertion (a person logged in with a passkey), which
        the inbox's page makes: its approvals link there."""
        me = self.access.principal(request)
        return me is not None and me.via == "passkey"

    @_signed_in
    async def request_view(self, request: Request, binding: str) -> Response:
        """One request in the console: the decision at the top, then who asked, risk, arguments, context."""
        request_id = request.path_params["request_id"]
        try:
            view = get_broker(self.runtime).get(request_id)
        except BatonError as exc:
            return self.inbox.refusal(exc, back=f"{BASE}/requests")
        me = self.access.principal(request)
        return self.page(
            "console_request.html",
            "requests",
            binding,
            r=view,
            action=f"{BASE}/requests/{request_id}",
            csrf=self.csrf(binding, request_id),
            # a passkey approval (step-up or not) runs on the inbox's page, which holds the ceremony's script
            stepup_link=f"/inbox/requests/{request_id}" if view["step_up"] or self._signs(request) else None,
            live_mode="stay",
            me=me,
            # a grant is a person's (a passkey session); a step-up tool's is made on the inbox's page
            grant=inbox_grant.offered(view, me.via if me else None),
        )

    async def decide(self, request: Request) -> Response:
        """The inbox's decide handler (auth, CSRF, origin, broker), then back to the console's list."""
        response = await self.inbox.decide(request)
        if response.status_code == 303:
            return RedirectResponse(f"{BASE}/requests", status_code=303, headers=HEADERS)
        return response

    async def decide_here(self, request: Request) -> Response:
        """The inbox's decide handler, then the request again (with its outcome and who decided)."""
        response = await self.inbox.decide(request)
        if response.status_code == 303:
            target = f"{BASE}/requests/{request.path_params['request_id']}"
            return RedirectResponse(target, status_code=303, headers=HEADERS)
        return response

    @_signed_in
    async def subagents(self, request: Request, binding: str) -> Response:
        """Every subagent with status, role, strategy, turns, tokens and latency."""
        status = request.query_params.get("status") or None
        rows = views.subagents(self.runtime, status)
        forms = {r["subagent_id"]: self.csrf(binding, f"cancel-subagent:{r['subagent_id']}") for r in rows}
        return self.page(
            "console_subagents.html", "subagents", binding, rows=rows, forms=forms, status=status
        )

    @_signed_in
    async def subagent(self, request: Request, binding: str) -> Response:
        """One subagent: prepared context and conversation (stored redacted), and cancel."""
        subagent_id = request.path_params["subagent_id"]
        try:
            detail = views.subagent(self.runtime, subagent_id)
        except BatonError as exc:
            return self.inbox.refusal(exc, back=f"{BASE}/subagents")
        form = self.csrf(binding, f"cancel-subagent:{subagent_id}")
        return self.page("console_subagent.html", "subagents", binding, s=detail, form=form)

    async def cancel_subagent(self, request: Request) -> Response:
        """Cancel a subagent (its running model call is cancelled too)."""
        subagent_id = request.path_params["subagent_id"]
        return await self._act(
            request,
            f"cancel-subagent:{subagent_id}",
            lambda: views.subagent_runner(self.runtime).cancel(subagent_id),
            f"{BASE}/subagents/{subagent_id}",
        )

    @_signed_in
    async def timers(self, request: Request, binding: str) -> Response:
        """Timers: next and last firing, missed flag, cancel."""
        rows = views.timers(self.runtime)
        forms = {r["timer_id"]: self.csrf(binding, f"cancel-timer:{r['timer_id']}") for r in rows}
        return self.page("console_timers.html", "timers", binding, rows=rows, forms=forms)

    async def cancel_timer(self, request: Request) -> Response:
        """Cancel a timer for good."""
        timer_id = request.path_params["timer_id"]
        return await self._act(
            request,
            f"cancel-timer:{timer_id}",
            lambda: views.timer_service(self.runtime).cancel(timer_id),
            f"{BASE}/timers",
        )

    @_signed_in
    async def adapters(self, request: Request, binding: str) -> Response:
        """Adapters: state, pins, tool partition, last replay, block reason, drift."""
        return self.page("console_adapters.html", "adapters", binding, rows=views.adapters(self.runtime))

    @_signed_in
    async def grants(self, request: Request, binding: str) -> Response:
        """Standing grants: the active ones (``?ended=1``: every one), each active one with a Revoke button."""
        from baton.hitl import grants

        ended = request.query_params.get("ended") == "1"
        rows = grants.listed(self.runtime, include_ended=ended)
        forms = {
            g["grant_id"]: self.csrf(binding, f"revoke-grant:{g['grant_id']}")
            for g in rows
            if g["status"] == "active"
        }
        return self.page("console_grants.html", "grants", binding, rows=rows, forms=forms, ended=ended)

    async def revoke_grant(self, request: Request) -> Response:
        """Revoke a standing grant at once; its ``hitl_grant_revoked`` receipt names who is logged in."""
        from baton.hitl import grants

        grant_id = request.path_params["grant_id"]
        who = self.access.principal(request)
        return await self._act(
            request,
            f"revoke-grant:{grant_id}",
            lambda: grants.revoke(self.runtime, grant_id, who.name if who else "unknown"),
            f"{BASE}/grants",
        )

    @_signed_in
    async def receipts(self, request: Request, binding: str) -> Response:
        """The chain's verdict and checkpoints, and receipts filtered by kind and time."""
        params = request.query_params
        kind = params.get("kind") or None
        since, until = params.get("since") or None, params.get("until") or None
        return self.page(
            "console_receipts.html",
            "receipts",
            binding,
            chain=views.chain(self.runtime),
            kinds=views.receipt_kinds(self.runtime),
            rows=views.receipts(self.runtime, kind, _instant(since), _instant(until)),
            kind=kind,
            since=since or "",
            until=until or "",
        )

    @_signed_in
    async def charts(self, request: Request, binding: str) -> Response:
        """Model tokens and latency over time, tool calls by outcome, approval wait times."""
        decided = views.requests(self.runtime)["decided"]
        return self.page(
            "console_charts.html", "charts", binding, charts=charts.all_charts(self.runtime, decided)
        )

    async def _act(self, request: Request, scope: str, action: Any, back: str) -> Response:
        binding = self.access.binding(request)
        if binding is None:
            return self.inbox.refusal(HitlError("hitl_unauthorized", "Log in with the inbox token first."))
        try:
            fields = await read_form(request)
            self.access.check_csrf(binding, scope, fields.get("csrf"), request)
            action()
        except BatonError as exc:
            return self.inbox.refusal(exc, back=back)
        return RedirectResponse(back, status_code=303, headers=HEADERS)


def _instant(value: str | None) -> str | None:
    """A ``datetime-local`` field (``2026-12-03T14:05``, taken as UTC) as the ISO form receipts use."""
    if not value:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def routes(runtime: Runtime) -> list[Route]:
    """The console's routes for ``baton serve --http`` and ``baton console``."""
    console = Console(runtime, Inbox(runtime, get_broker(runtime)))
    return [
        Route(BASE, console.home, methods=["GET"]),
        Route(f"{BASE}/requests", console.requests, methods=["GET"]),
        Route(f"{BASE}/requests/{{request_id}}", console.request_view, methods=["GET"]),
        Route(f"{BASE}/requests/{{request_id}}", console.decide_here, methods=["POST"]),
        Route(f"{BASE}/requests/{{request_id}}/decide", console.decide, methods=["POST"]),
        Route(f"{BASE}/subagents", console.subagents, methods=["GET"]),
        Route(f"{BASE}/subagents/{{subagent_id}}", console.subagent, methods=["GET"]),
        Route(f"{BASE}/subagents/{{subagent_id}}/cancel", console.cancel_subagent, methods=["POST"]),
        Route(f"{BASE}/timers", console.timers, methods=["GET"]),
        Route(f"{BASE}/timers/{{timer_id}}/cancel", console.cancel_timer, methods=["POST"]),
        Route(f"{BASE}/adapters", console.adapters, methods=["GET"]),
        Route(f"{BASE}/grants", console.grants, methods=["GET"]),
        Route(f"{BASE}/grants/{{grant_id}}/revoke", console.revoke_grant, methods=["POST"]),
        Route(f"{BASE}/receipts", console.receipts, methods=["GET"]),
        Route(f"{BASE}/charts", console.charts, methods=["GET"]),
    ]
