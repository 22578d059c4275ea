"""The ``baton`` command: a thin typer layer over the core (it parses, calls and prints)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from baton import __version__
from baton.errors import BatonError
from baton.terminal import err, fail, open_runtime, out, print_json, print_table, progress

if TYPE_CHECKING:
    from baton.ops.install import Plan

app = typer.Typer(
    name="baton",
    help="One MCP server for subagents, humans in the loop and governed tools.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every subcommand inherits -h
)
db_app = typer.Typer(help="The store's schema (Alembic migrations).", no_args_is_help=True)
receipts_app = typer.Typer(help="Inspect and verify the receipt chain.", no_args_is_help=True)
subagents_app = typer.Typer(help="Inspect and cancel subagents.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(receipts_app, name="receipts")
app.add_typer(subagents_app, name="subagents")

#: Each subsystem's own sub-app (``app`` in the module), in the order ``baton --help`` lists them.
SUBSYSTEM_APPS = {
    "agents": "baton.identity.agents_cli",
    "hitl": "baton.hitl.cli",
    "people": "baton.identity.people_cli",
    "chat": "baton.chat.cli",
    "timers": "baton.timers.cli",
    "gateway": "baton.gateway.cli",
    "campaign": "baton.campaign.cli",
    "witness": "baton.witness.cli",
}


def _add_subsystem_apps() -> None:
    import importlib

    for name, module in SUBSYSTEM_APPS.items():
        app.add_typer(importlib.import_module(module).app, name=name)


_add_subsystem_apps()

__all__ = ["app", "err", "fail", "main", "open_runtime", "out", "print_json"]


@app.command()
def version() -> None:
    """Print baton's version."""
    out.print(__version__)


def _print_version(value: bool) -> None:
    if value:
        out.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", help="Print baton's version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """One MCP server for subagents, humans in the loop and governed tools."""


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
    conformance_fixtures: Annotated[
        bool,
        typer.Option(
            help="Add the MCP conformance suite's reference tools, prompts and resources (loopback only; "
            "also BATON_CONFORMANCE_FIXTURES=1; docs/conformance.md)."
        ),
    ] = False,
    experimental_events: Annotated[
        bool,
        typer.Option(
            help="Offer the draft MCP Events extension: request decided, timer fired, subagent finished "
            "(also BATON_EXPERIMENTAL_EVENTS=1; docs/events.md)."
        ),
    ] = False,
) -> None:
    """Run the MCP server (stdio by default; --http HOST:PORT for streamable HTTP at /mcp)."""
    from baton.serve import run_serve

    raise typer.Exit(run_serve(http, stateless, conformance_fixtures, experimental_events))


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Report the readiness of store, model provider, notification channels and sandbox (no secrets)."""
    from baton.ops import doctor as checks

    runtime = open_runtime()
    results = checks.run_checks(runtime)
    if as_json:
        print_json(checks.as_json(results))
        return
    print_table(
        ("check", "ready", "detail"),
        [
            (check.name, "[green]yes[/green]" if check.ok else "[yellow]no[/yellow]", check.detail)
            for check in results
        ],
        markup=True,
    )


#: ``install``'s argument and options, declared apart so that its signature stays a list of names.
InstallClient = Annotated[str, typer.Argument(help="claude-code, claude-desktop, cursor or vscode.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print what would be written; touch nothing.")]
RunClaude = Annotated[bool, typer.Option("--run", help="claude-code: run the `claude mcp add` line.")]
InstallProvider = Annotated[
    str | None,
    typer.Option(help="Model provider for the entry (default: COLLAB_PROVIDER, else moonshot)."),
]
InstallModel = Annotated[
    str | None, typer.Option(help="OPENAI_MODEL for the entry (default: the provider's).")
]
ServerName = Annotated[str, typer.Option(help="The server's name in the client.")]
InstallConfig = Annotated[
    Path | None, typer.Option("--config", help="Another config file (default: the client's own).")
]


def _write_entry(plan: Plan, name: str, run: bool, dry_run: bool) -> None:
    """Print Claude Code's line (running it with --run), show a dry run, or write the config with a backup."""
    from baton.ops import install as installer

    if plan.client == "claude-code":
        print(installer.claude_line(plan), flush=True)
        if run and not dry_run:
            installer.run_claude(plan)
            err.print(f"added '{name}' to Claude Code (user scope)")
    elif dry_run:
        print(plan.after, end="", flush=True)
        verb = "would change" if plan.changed else "already holds this entry:"
        err.print(f"dry run: {verb} {plan.path}; nothing was written")
    else:
        backup = installer.apply(plan)
        if not plan.changed:
            err.print(f"{plan.path} already holds this entry; nothing written")
        else:
            err.print(f"wrote {plan.path}" + (f" (previous file kept as {backup.name})" if backup else ""))


def _print_to_fill(plan: Plan, run: bool) -> None:
    """Name the credentials the entry leaves for the user to fill, and where, since baton writes no secret."""
    if not plan.to_fill:
        return
    names = ", ".join(plan.to_fill)
    if plan.client == "vscode":
        err.print(f"VS Code asks for {names} when it first starts baton and keeps it; baton writes no secret")
    elif plan.client == "claude-code" and not run:
        err.print(f"export {names} in your shell before running the line; baton writes no secret")
    else:
        where = "~/.claude.json (or `claude mcp`)" if plan.client == "claude-code" else str(plan.path)
        err.print(f"still to fill: {names} in {where}; baton writes no secret")


@app.command()
def install(
    client: InstallClient,
    dry_run: DryRun = False,
    run: RunClaude = False,
    provider: InstallProvider = None,
    model: InstallModel = None,
    name: ServerName = "baton",
    config: InstallConfig = None,
) -> None:
    """Add this baton (by absolute path, no secret) to an MCP client's config; idempotent, with a backup."""
    import os

    from baton.ops import install as installer

    try:
        chosen = provider or os.environ.get("COLLAB_PROVIDER") or "moonshot"
        plan = installer.plan(client, provider=chosen, model=model, name=name, path=config)
        _write_entry(plan, name, run, dry_run)
    except BatonError as exc:
        fail(exc)
    _print_to_fill(plan, run)


@app.command()
def console(
    bind: Annotated[str, typer.Option("--bind", help="HOST:PORT, on loopback only.")] = "127.0.0.1:8766",
) -> None:
    """Open the operator console on loopback over the local store (no MCP server)."""
    from baton.console.local import run_console

    raise typer.Exit(run_console(bind))


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration to the store (BATON_DATABASE_URL or BATON_HOME/baton.db)."""
    from baton.config import load_settings
    from baton.store.engine import create_store_engine
    from baton.store.migrate import current_revision, upgrade

    engine = create_store_engine(load_settings().database_url)
    before = current_revision(engine)
    after = upgrade(engine)
    engine.dispose()
    out.print(f"store at revision {after} (was {before or 'empty'})")


@db_app.command("current")
def db_current() -> None:
    """Print the store's schema revision."""
    from baton.config import load_settings
    from baton.store.engine import create_store_engine
    from baton.store.migrate import current_revision

    engine = create_store_engine(load_settings().database_url)
    out.print(current_revision(engine) or "empty")
    engine.dispose()


@receipts_app.command("list")
def receipts_list(
    kind: Annotated[str | None, typer.Option(help="Only receipts of this kind.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many.")] = 50,
    oldest: Annotated[
        bool, typer.Option("--oldest", help="The oldest first (default: the newest first).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List receipts, the newest first (--oldest: from the start of the chain)."""
    log = open_runtime().receipts
    found = log.list(kind=kind, limit=limit) if oldest else log.newest(kind=kind, limit=limit)
    if kind is not None and not found and kind not in (known := log.kinds()):
        # not an error (a kind may simply not have happened yet), but say what the chain does hold
        err.print(
            f"no receipt has the kind {kind!r} yet; the chain holds: {', '.join(known) or 'nothing yet'}",
            highlight=False,
            markup=False,
        )
    rows = [row.model_dump() for row in found]
    if as_json:
        print_json(rows)
        return
    print_table(
        ("seq", "kind", "at", "sha256", "payload"),
        [
            (str(row["seq"]), row["kind"], row["at"], row["sha256"][:16], json.dumps(row["payload"])[:80])
            for row in rows
        ],
    )


@receipts_app.command("verify")
def receipts_verify(
    export_dir: Annotated[
        str | None, typer.Argument(help="An export (baton receipts export) to verify instead of the store.")
    ] = None,
    public_key: Annotated[
        str | None, typer.Option("--public-key", help="The trusted checkpoint.pub (default: this home's).")
    ] = None,
    replay: Annotated[
        bool,
        typer.Option("--replay", help="Also re-derive each gateway call's verdict from its pinned policies."),
    ] = False,
) -> None:
    """Recompute the whole receipt chain, check its signed checkpoints and approvals' passkey assertions;
    exit 1 at the first problem (--replay: and at any gateway verdict that replays differently)."""
    from pathlib import Path

    from baton.chain_verify import approvals_line
    from baton.evidence.anchor import verify_export_dir, verify_store

    runtime = open_runtime()
    with progress("verifying the receipt chain"):
        try:
            report = (
                verify_export_dir(runtime, Path(export_dir), Path(public_key) if public_key else None)
                if export_dir
                else verify_store(runtime)
            )
        except BatonError as exc:
            fail(exc)
            return
    replayed = _replay(runtime, export_dir) if replay else True
    if not report.ok:
        err.print(f"[red]{report.error_class}[/red]: at seq {report.first_bad_seq}: {report.reason}")
        raise typer.Exit(1)
    out.print(f"[green]ok[/green]: {report.count} receipts")
    out.print(f"head: {report.head_sha256}")
    if report.checkpoints:
        out.print(f"checkpoints: {report.checkpoints} signed checkpoints verified")
        out.print(f"anchored up to seq {report.anchored_seq}")
        tail = report.count - report.anchored_seq
        if tail:
            out.print(f"not yet anchored: the last {tail} receipts")
    elif report.count:
        out.print("[yellow]not anchored[/yellow]: no signed checkpoint (a serving baton writes them)")
    if report.assertions:
        out.print(approvals_line(report), highlight=False, markup=False)
    if not replayed:
        raise typer.Exit(1)


def _replay(runtime: Any, export_dir: str | None) -> bool:
    """Print what replay found (each differing verdict, each call it could not judge); whether all agreed."""
    from pathlib import Path

    from baton.gateway.policy.verdict_replay import replay_export, replay_store

    found = replay_export(Path(export_dir)) if export_dir else replay_store(runtime)
    for line in found.mismatches:
        err.print(f"receipt_replay_mismatch: {line}", highlight=False, markup=False)
    for line in found.unreplayable:
        err.print(f"receipt_replay_unavailable: {line}", highlight=False, markup=False)
    out.print(
        f"replay: {found.replayed} gateway calls re-derived their recorded verdict; "
        f"{len(found.mismatches)} differ, {len(found.unreplayable)} could not be replayed",
        highlight=False,
        markup=False,
    )
    return found.ok


@receipts_app.command("export")
def receipts_export(
    directory: Annotated[
        str,
        typer.Argument(help="Directory to write receipts.jsonl, checkpoints.jsonl and checkpoint.pub into."),
    ],
    record_format: Annotated[
        Literal["baton", "sep-3004"],
        typer.Option(
            "--format", help="baton (the source of truth) or sep-3004 (a view: records.jsonl, manifest.json)."
        ),
    ] = "baton",
) -> None:
    """Export the chain and its signed checkpoints for `python -m baton.chain_verify DIR --public-key FILE`."""
    from pathlib import Path

    from baton.evidence.anchor import export

    if record_format == "sep-3004":
        from baton.evidence.sep3004 import export as export_records

        out.print(
            f"exported {export_records(open_runtime(), Path(directory))} SEP-3004 records to {directory}"
        )
        return
    try:
        written = export(open_runtime(), Path(directory))
    except BatonError as exc:
        fail(exc)
        return
    out.print(
        f"exported {written['receipts']} receipts, {written['checkpoints']} checkpoints and "
        f"{written['policies']} policy versions to {directory}"
    )


def _runner() -> Any:
    from baton.subagents.runner import SubagentRunner

    return SubagentRunner(open_runtime())


@subagents_app.command("list")
def subagents_list(
    status: Annotated[
        Literal["queued", "running", "completed", "failed", "cancelled"] | None,
        typer.Option(help="Only this status."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List subagents, newest first."""
    from baton.evidence.redaction import redact_output

    rows = redact_output(_runner().list(status))
    if as_json:
        print_json(rows)
        return
    print_table(
        ("id", "status", "mode", "strategy", "role", "created"),
        [
            (
                row["subagent_id"],
                row["status"],
                row["mode"],
                row["context_strategy"],
                row["role"],
                row["created_at"],
            )
            for row in rows
        ],
    )


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
    """Entry point of the console script: a typed error or one ``internal_error`` line, never a traceback
    (``BATON_DEBUG=1`` shows it)."""
    import os

    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
    except BatonError as exc:  # e.g. config_invalid from the environment, in any command
        from rich.markup import escape

        from baton.terminal_text import printable

        err.print(
            f"[red]{exc.error_class}[/red]: {escape(printable(exc.message))}", markup=True, highlight=False
        )
        sys.exit(1)  # not fail(): typer.Exit raised outside the app would print a traceback
    except Exception as exc:
        if os.environ.get("BATON_DEBUG") == "1":
            raise
        err.print(
            f"[red]internal_error[/red]: the command failed unexpectedly ({type(exc).__name__}); "
            "BATON_DEBUG=1 shows the traceback."
        )
        sys.exit(1)
