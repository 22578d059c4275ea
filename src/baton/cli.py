"""The ``baton`` command: a thin typer layer over the core (it parses, calls and prints)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton import __version__
from baton.errors import BatonError

app = typer.Typer(
    name="baton",
    help="One MCP server for subagents, humans in the loop and governed tools.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The store's schema (Alembic migrations).", no_args_is_help=True)
receipts_app = typer.Typer(help="Inspect and verify the receipt chain.", no_args_is_help=True)
subagents_app = typer.Typer(help="Inspect and cancel subagents.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(receipts_app, name="receipts")
app.add_typer(subagents_app, name="subagents")

#: Each subsystem's own sub-app (``app`` in the module), in the order ``baton --help`` lists them.
SUBSYSTEM_APPS = {
    "hitl": "baton.hitl.cli",
    "timers": "baton.timers.cli",
    "gateway": "baton.gateway.cli",
    "campaign": "baton.campaign.cli",
}


def _add_subsystem_apps() -> None:
    import importlib

    for name, module in SUBSYSTEM_APPS.items():
        app.add_typer(importlib.import_module(module).app, name=name)


_add_subsystem_apps()

out = Console()
err = Console(stderr=True)


def open_runtime() -> Any:
    """The runtime for a CLI command (imported late to keep ``--help`` fast)."""
    from baton.runtime import Runtime

    return Runtime.open()


def fail(exc: BatonError) -> None:
    """Print a typed error on stderr and exit 1."""
    err.print(f"[red]{exc.error_class}[/red]: {exc.message}")
    raise typer.Exit(1)


def print_json(value: Any) -> None:
    """Machine-readable output on stdout."""
    out.print_json(json.dumps(value, ensure_ascii=False, default=str))


@app.command()
def version() -> None:
    """Print baton's version."""
    out.print(__version__)


@app.command()
def serve(
    http: Annotated[
        str | None, typer.Option(help="Serve streamable HTTP on HOST:PORT instead of stdio.")
    ] = None,
    stateless: Annotated[
        bool,
        typer.Option(
            help="Keep no MCP session in this process, so replicas behind a load balancer need no "
            "stickiness (also BATON_HTTP_STATELESS=true)."
        ),
    ] = False,
) -> None:
    """Run the MCP server (stdio by default; --http HOST:PORT for streamable HTTP at /mcp)."""
    from baton.server import run_serve

    raise typer.Exit(run_serve(http, stateless))


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Report the readiness of store, model provider, notification channels and sandbox (no secrets)."""
    from baton import doctor as checks

    runtime = open_runtime()
    results = checks.run_checks(runtime)
    if as_json:
        print_json(checks.as_json(results))
        return
    table = Table("check", "ready", "detail")
    for check in results:
        table.add_row(check.name, "[green]yes[/green]" if check.ok else "[yellow]no[/yellow]", check.detail)
    out.print(table)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration to the store (BATON_DATABASE_URL or BATON_HOME/baton.db)."""
    from baton.config import load_settings
    from baton.schema_migrations import current_revision, upgrade
    from baton.store import create_store_engine

    engine = create_store_engine(load_settings().database_url)
    before = current_revision(engine)
    after = upgrade(engine)
    engine.dispose()
    out.print(f"store at revision {after} (was {before or 'empty'})")


@db_app.command("current")
def db_current() -> None:
    """Print the store's schema revision."""
    from baton.config import load_settings
    from baton.schema_migrations import current_revision
    from baton.store import create_store_engine

    engine = create_store_engine(load_settings().database_url)
    out.print(current_revision(engine) or "empty")
    engine.dispose()


@receipts_app.command("list")
def receipts_list(
    kind: Annotated[str | None, typer.Option(help="Only receipts of this kind.")] = None,
    limit: Annotated[int, typer.Option(help="How many.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List receipts in chain order."""
    rows = open_runtime().receipts.list(kind=kind, limit=limit)
    if as_json:
        print_json([row.model_dump() for row in rows])
        return
    table = Table("seq", "kind", "at", "sha256", "payload")
    for row in rows:
        table.add_row(str(row.seq), row.kind, row.at, row.sha256[:16], json.dumps(row.payload)[:80])
    out.print(table)


@receipts_app.command("verify")
def receipts_verify() -> None:
    """Recompute the whole receipt chain; exit 1 at the first broken link."""
    report = open_runtime().receipts.verify()
    if report.ok:
        out.print(f"[green]ok[/green]: {report.count} receipts, head {report.head_sha256}")
        return
    err.print(f"[red]receipt_chain_broken[/red]: at seq {report.first_bad_seq}: {report.reason}")
    raise typer.Exit(1)


def _runner() -> Any:
    from baton.subagents.runner import SubagentRunner

    return SubagentRunner(open_runtime())


@subagents_app.command("list")
def subagents_list(
    status: Annotated[str | None, typer.Option(help="Only this status.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List subagents, newest first."""
    rows = _runner().list(status)
    if as_json:
        print_json(rows)
        return
    table = Table("id", "status", "mode", "strategy", "role", "created")
    for row in rows:
        table.add_row(
            row["subagent_id"],
            row["status"],
            row["mode"],
            row["context_strategy"],
            row["role"],
            row["created_at"],
        )
    out.print(table)


@subagents_app.command("show")
def subagents_show(subagent_id: str) -> None:
    """Show one subagent with its whole conversation."""
    runner = _runner()
    try:
        print_json({**runner.status(subagent_id), "messages": runner.history(subagent_id)})
    except BatonError as exc:
        fail(exc)


@subagents_app.command("cancel")
def subagents_cancel(subagent_id: str) -> None:
    """Cancel a subagent (a running server notices within a second and cancels its model call)."""
    try:
        print_json(_runner().cancel(subagent_id))
    except BatonError as exc:
        fail(exc)


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
    except BatonError as exc:  # e.g. config_invalid from the environment, in any command
        err.print(f"[red]{exc.error_class}[/red]: {exc.message}", markup=True, highlight=False)
        sys.exit(1)
