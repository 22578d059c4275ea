"""``baton hitl list|show|approve|reject|answer|watch|link|grants``: decide requests from a shell, against the same store.

A server in another process notices a decision made here within its store poll (a fraction of a
second) and wakes the waiting tool call.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from baton.errors import BatonError
from baton.hitl.titles import terminal_title
from baton.terminal import err, out, print_table
from baton.terminal import fail as _fail
from baton.terminal import print_json as _print_json
from baton.terminal_text import printable, printable_value

app = typer.Typer(
    help="Human-in-the-loop requests: list, decide, watch; standing grants.", no_args_is_help=True
)

NotesOption = Annotated[str | None, typer.Option("--notes", help="Notes returned to the agent.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
#: ``hitl show`` prints the message exactly as the agent wrote it; its label says that is markdown source
#: (lists show the rendered title).
SHOW_LABELS = {"message": "message (markdown source)"}


def _broker() -> Any:
    from baton.hitl.broker import get_broker
    from baton.runtime import Runtime

    return get_broker(Runtime.open())


def _table(rows: list[dict[str, Any]]) -> None:
    print_table(
        ("request_id", "kind", "agent", "urgent", "title", "expires_at"),
        [
            (
                row["request_id"],
                row["kind"],
                row.get("agent") or "-",
                "yes" if row["urgent"] else "",
                terminal_title(row["message"]),
                row["expires_at"],
            )
            for row in rows
        ],
    )


@app.command("list")
def list_requests(as_json: JsonOption = False) -> None:
    """List pending requests, urgent first, then the soonest to expire."""
    from baton.evidence.redaction import redact_output
    from baton.hitl.broker import public_view

    rows = redact_output([public_view(view) for view in _broker().list_pending()])
    if as_json:
        _print_json(rows)
        return
    if rows:
        _table(rows)
    else:
        out.print("No pending requests.")


@app.command("show")
def show(request_id: str, as_json: JsonOption = False) -> None:
    """Show one request: its message, context, options, status and decision."""
    from baton.evidence.redaction import redact_output

    try:
        view = _broker().get(request_id)
    except BatonError as exc:
        _fail(exc)
        return
    shown = redact_output({key: value for key, value in view.items() if key != "expires_epoch"})
    if as_json:
        _print_json(shown)
        return
    print_table(
        ("field", "value"),
        [
            (SHOW_LABELS.get(key, key), printable_value(value))
            for key, value in shown.items()
            if value not in (None, "")
        ],
    )


def _decide(request_id: str, quiet: bool = False, **decision: Any) -> dict[str, Any] | None:
    from baton.hitl.broker import Decision
    from baton.identity.os_accounts import current_account

    account = current_account()  # the real uid, never LOGNAME/USER
    try:
        view: dict[str, Any] = _broker().respond(
            request_id, Decision(**decision, via="cli", os_uid=account.uid)
        )
    except BatonError as exc:
        _fail(exc)
        return None
    if not quiet:
        _print_json({key: value for key, value in view.items() if key != "expires_epoch"})
    return view


@app.command("approve")
def approve(
    request_id: str,
    notes: NotesOption = None,
    grant_for: Annotated[
        str | None,
        typer.Option("--for", help="Also let the agent call this tool again for this long (30m, 2h)."),
    ] = None,
    uses: Annotated[int, typer.Option("--uses", help="With --for: at most this many calls.")] = 10,
    when: Annotated[
        str | None,
        typer.Option("--when", help="With --for: only calls whose arguments match this Cedar condition."),
    ] = None,
) -> None:
    """Approve a pending approval request (with --for, a standing grant for the same agent and tool)."""
    from baton.hitl.grants_cli import check_grant, grant_after_approval

    if grant_for is not None:
        try:
            check_grant(_broker().get(request_id), grant_for, uses, when)
        except BatonError as exc:
            _fail(exc)
    view = _decide(request_id, approved=True, admin_notes=notes, quiet=grant_for is not None)
    if grant_for is None or view is None:
        return

    try:
        grant = grant_after_approval(view, grant_for, uses, when)
    except BatonError as exc:
        _fail(exc)
        return
    shown = {key: value for key, value in view.items() if key != "expires_epoch"}
    _print_json({**shown, "grant": grant})


@app.command("reject")
def reject(request_id: str, notes: NotesOption = None) -> None:
    """Reject a pending approval request (or decline an input request)."""
    _decide(request_id, approved=False, admin_notes=notes)


@app.command("answer")
def answer(request_id: str, text: str, notes: NotesOption = None) -> None:
    """Answer a pending input request with TEXT."""
    _decide(request_id, response=text, admin_notes=notes)


@app.command("watch")
def watch(
    interval: Annotated[float, typer.Option(help="Seconds between looks at the store.")] = 1.0,
    max_seconds: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
) -> None:
    """Print requests as they arrive and leave the pending list, until Ctrl-C."""
    from baton.evidence.redaction import redact_output

    broker = _broker()
    seen: dict[str, dict[str, Any]] = {}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            current = {view["request_id"]: redact_output(view) for view in broker.list_pending()}
            for request_id, view in current.items():
                if request_id not in seen:
                    flag = "[bold red]URGENT[/bold red] " if view["urgent"] else ""
                    title = terminal_title(view["message"])
                    text = escape(printable(f"new {view['kind']} {request_id}: ") + title)
                    out.print(
                        f"{flag}{text} (expires {view['expires_at']})",
                        soft_wrap=True,
                        markup=True,
                        highlight=False,
                    )
            for request_id in seen.keys() - current.keys():
                final = broker.get(request_id)
                out.print(
                    printable(
                        f"{final['status']} {request_id} by {final['decided_by'] or 'nobody'} via "
                        f"{final['decided_via'] or 'expiry'}"
                    ),
                    soft_wrap=True,
                    markup=False,
                    highlight=False,
                )
            seen = current
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


@app.command("link")
def link(
    request_id: str,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="The inbox's base URL; default BATON_PUBLIC_URL, else where `baton serve --http` listens."
        ),
    ] = None,
) -> None:
    """Print a signed single-use inbox link for a pending request (valid until the request expires)."""
    from baton.errors import HitlError
    from baton.identity.links import LinkSigner, fingerprint, served_fingerprint

    broker = _broker()
    try:
        view = broker.get(request_id)
    except BatonError as exc:
        _fail(exc)
        return
    from baton.identity.public_url import public_url

    base = base_url or public_url(broker.runtime.settings)
    if not base:
        err.print(
            "[red]config_invalid[/red]: give --base-url, set BATON_PUBLIC_URL or start `baton serve --http`."
        )
        raise typer.Exit(1)
    signer = LinkSigner.for_runtime(broker.runtime)
    served = served_fingerprint(broker.runtime.settings)
    if served is not None and served != fingerprint(signer):
        _fail(
            HitlError(
                "hitl_link_invalid",
                "The server on this home signs links with other tokens than this shell has "
                "(BATON_HTTP_TOKEN, BATON_ADMIN_TOKEN), so it would refuse this link; run the command "
                "with the server's environment.",
            )
        )
    if served is None:
        err.print(
            "no `baton serve --http` has run on this home yet: the link is signed with this shell's tokens"
        )
    out.print(signer.link(base, request_id, view["expires_epoch"]), soft_wrap=True)


def _add_grants() -> None:
    from baton.hitl.grants_cli import app as grants_app

    app.add_typer(grants_app, name="grants")


_add_grants()
