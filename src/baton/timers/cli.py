"""``baton timers list | cancel ID``: a thin layer over :class:`TimerService`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.errors import BatonError

app = typer.Typer(help="Inspect and cancel timers.", no_args_is_help=True)
out = Console()
err = Console(stderr=True)


def _service() -> Any:
    from baton.runtime import Runtime
    from baton.timers.service import TimerService

    return TimerService(Runtime.open())


def _print_json(value: Any) -> None:
    from baton.redaction import redact_output

    out.print_json(json.dumps(redact_output(value), ensure_ascii=False, default=str))


@app.command("list")
def list_timers(
    status: Annotated[str | None, typer.Option(help="Only active, completed or cancelled timers.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List timers in the order they were set."""
    from baton.redaction import redact_output

    rows = redact_output(_service().list(status))
    if as_json:
        _print_json(rows)
        return
    table = Table("id", "name", "status", "schedule", "next fire", "fired", "last outcome")
    for row in rows:
        last = row["last_firing"] or {}
        schedule = row["schedule"] if row["schedule"] == "once" else f"every {row['interval_seconds']:g}s"
        table.add_row(
            row["timer_id"],
            row["name"],
            row["status"],
            schedule,
            row["next_fire_at"] or "-",
            str(row["fire_count"]),
            (last.get("outcome") or "-") + (" (missed)" if last.get("missed") else ""),
        )
    out.print(table)


@app.command("cancel")
def cancel_timer(timer_id: str) -> None:
    """Cancel a timer for good (running servers see it at their next claim)."""
    try:
        _print_json(_service().cancel(timer_id))
    except BatonError as exc:
        err.print(f"[red]{exc.error_class}[/red]: {exc.message}")
        raise typer.Exit(1) from None
