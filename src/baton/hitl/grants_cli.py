"""``baton hitl grants`` (list, revoke) and the grant an approval can carry (``approve ID --for 30m``)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from baton.errors import ArgumentError, BatonError
from baton.terminal import fail as _fail
from baton.terminal import out, print_table
from baton.terminal import print_json as _print_json
from baton.terminal_text import printable

app = typer.Typer(help="Standing grants: list them, revoke one.", invoke_without_command=True)

DURATION = re.compile(r"^(\d{1,6})([smh]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def seconds_of(text: str) -> int:
    """``90``, ``90s``, ``30m`` or ``2h`` in seconds (``invalid_arguments`` otherwise)."""
    match = DURATION.match(text.strip().lower())
    if match is None:
        raise ArgumentError("invalid_arguments", f"A duration is like 90s, 30m or 2h, not {text!r}.")
    return int(match.group(1)) * UNIT_SECONDS[match.group(2)]


def check_grant(view: dict[str, Any], duration: str, uses: int, condition: str | None) -> None:
    """Refuse a grant that could not be made before the approval it comes with is recorded."""
    from baton.hitl import grants

    grants.check(view, grants.GrantAsk(seconds_of(duration), uses, condition), "cli", decided=False)


def grant_after_approval(
    view: dict[str, Any], duration: str, uses: int, condition: str | None
) -> dict[str, Any]:
    """The grant a CLI approval asked for, made by the same person the decision names."""
    from baton.hitl import grants
    from baton.runtime import Runtime

    ask = grants.GrantAsk(seconds_of(duration), uses, condition)
    runtime = Runtime.open()
    try:
        return grants.create(runtime, view, ask, str(view.get("decided_by")), "cli")
    finally:
        runtime.close()


def _rows(rows: list[dict[str, Any]]) -> None:
    print_table(
        ("grant_id", "status", "agent", "tool", "uses", "expires_at", "condition"),
        [
            (
                row["grant_id"],
                row["status"],
                printable(str(row["agent"])),
                printable(f"{row['adapter_id']}__{row['tool']}"),
                f"{row['uses']}/{row['max_uses']}",
                row["expires_at"],
                printable(row["condition"] or "any arguments"),
            )
            for row in rows
        ],
    )


@app.callback()
def grants_list(
    ctx: typer.Context,
    include_ended: Annotated[
        bool, typer.Option("--all", help="Also expired, used-up and revoked ones.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the active standing grants (newest first)."""
    if ctx.invoked_subcommand is not None:
        return
    from baton.hitl import grants
    from baton.runtime import Runtime

    runtime = Runtime.open()
    try:
        rows = grants.listed(runtime, include_ended)
    finally:
        runtime.close()
    if as_json:
        _print_json(rows)
    elif rows:
        _rows(rows)
    else:
        out.print("No standing grants." if include_ended else "No active standing grants.")


@app.command("revoke")
def revoke(grant_id: str) -> None:
    """Revoke a standing grant at once: the next call it would have covered asks a person again."""
    from baton.hitl import grants
    from baton.identity.os_accounts import current_account
    from baton.runtime import Runtime

    runtime = Runtime.open()
    try:
        _print_json(grants.revoke(runtime, grant_id, current_account().user))
    except BatonError as exc:
        _fail(exc)
    finally:
        runtime.close()
