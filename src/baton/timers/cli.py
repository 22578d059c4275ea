"""``baton timers list | cancel ID``: a thin layer over :class:`TimerService`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from baton.errors import BatonError
from baton.terminal import fail, print_table
from baton.terminal import print_json as _print_json

app = typer.Typer(help="Inspect and cancel timers.", no_args_is_help=True)


def _service() -> Any:
    from baton.runtime import Runtime
    from baton.timers.service import TimerService

    return TimerService(Runtime.open())


@app.command("list")
def list_timers(
    status: Annotated[
        Literal["active", "completed", "cancelled"] | None,
        typer.Option(help="Only active, completed or cancelled timers."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List timers in the order they were set."""
    from baton.evidence.redaction import redact_output

    rows = redact_output(_service().list(status))
    if as_json:
        _print_json(rows)
        return
    cells = []
    for row in rows:
        last = row["last_firing"] or {}
        schedule = row["schedule"] if row["schedule"] == "once" else f"every {row['interval_seconds']:g}s"
        cells.append(
            (
                row["timer_id"],
                row["name"],
                row["status"],
                schedule,
                row["next_fire_at"] or "-",
                str(row["fire_count"]),
                (last.get("outcome") or "-") + (" (missed)" if last.get("missed") else ""),
            )
        )
    print_table(("id", "name", "status", "schedule", "next fire", "fired", "last outcome"), cells)


@app.command("cancel")
def cancel_timer(timer_id: str) -> None:
    """Cancel a timer for good (running servers see it at their next claim)."""
    try:
        _print_json(_service().cancel(timer_id))
    except BatonError as exc:
        fail(exc)
