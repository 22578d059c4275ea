"""``baton gateway``: lock, verify, check, replay and list governed external MCP servers (thin over the core)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from baton.errors import BatonError

app = typer.Typer(
    help="Govern external MCP servers: lock, verify, check, replay, promote, demote, list.",
    no_args_is_help=True,
)


#: How much of a failed server's stderr the terminal shows (the receipt keeps its last 2 KiB).
STDERR_LINES_SHOWN = 12
STDERR_LINE_CHARS = 200


def explain(exc: BatonError) -> list[str]:
    """The lines under a stage failure: the server's exit status, its last stderr lines, the receipt."""
    from baton.redaction import redact_output

    details = exc.details
    lines = []
    if details.get("process_exit_code") is not None:
        lines.append(f"exit status: {details['process_exit_code']}")
    tail = str(redact_output(details.get("stderr_tail") or "")).rstrip("\n")
    if tail.strip():
        shown = tail.splitlines()[-STDERR_LINES_SHOWN:]
        lines.append(f"last {len(shown)} lines of the server's stderr:")
        lines += [
            "  " + (line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…")
            for line in shown
        ]
    if details.get("failure_receipt_path"):
        lines.append(f"receipt: {details['failure_receipt_path']}")
    return lines


def _fail(exc: BatonError) -> Any:
    from rich.markup import escape

    from baton.terminal import err

    err.print(f"[red]{exc.error_class}[/red]: {escape(exc.message)}")
    for line in explain(exc):
        err.print(escape(line), highlight=False, soft_wrap=True)
    raise typer.Exit(1)


@contextmanager
def _progress(title: str) -> Iterator[None]:
    """On a terminal, a progress display on stderr fed by the core's phases; on a pipe, nothing."""
    from baton.gateway.progress import Listener, listening
    from baton.terminal import err

    if not err.is_terminal:
        yield
        return
    from rich.filesize import decimal
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(title, total=None, count="")
        sizes = {"bytes": 0}

        def on_phase(description: str, total: int | None) -> None:
            sizes["bytes"] = 0
            bar.reset(task, description=description, total=total, count="" if total is None else f"0/{total}")

        def on_advance(size: int) -> None:
            sizes["bytes"] += size
            bar.advance(task)
            done = bar.tasks[0]
            total = "" if done.total is None else f"/{done.total:.0f}"
            bar.update(task, count=f"{done.completed:.0f}{total} · {decimal(sizes['bytes'])}")

        with listening(Listener(on_phase, on_advance)):
            yield


def _run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    from baton.terminal import fail, open_runtime

    try:
        runtime = open_runtime()
    except BatonError as exc:
        fail(exc)
    try:
        with _progress(f"gateway {fn.__name__.replace('_', ' ')}"):
            return fn(runtime, *args, **kwargs)
    except BatonError as exc:
        _fail(exc)
    except Exception as exc:  # never a traceback to the user; the log has it
        logging.getLogger("baton.gateway").debug("unexpected failure", exc_info=True)
        fail(BatonError("internal_error", f"The command failed unexpectedly ({type(exc).__name__})."))
    finally:
        runtime.close()


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")]


def _print(value: Any) -> None:
    from baton.terminal import print_json

    print_json(value)


def _emit(command: str, result: dict[str, Any], as_json: bool) -> None:
    """The full result as JSON with ``--json``; else a short summary ending with the next command."""
    if as_json:
        _print(result)
        return
    from baton.gateway.summary import summarize
    from baton.redaction import redact_output

    for line in summarize(command, result):
        typer.echo(redact_output(line))


@app.command()
def lock(
    target: Annotated[
        str,
        typer.Argument(
            help="Adapter id, policy path, or a candidate: npm:NAME[@VERSION|RANGE], pypi:NAME[==VERSION]."
        ),
    ],
    adapter_id: Annotated[str | None, typer.Option("--id", help="Adapter id for a drafted policy.")] = None,
    argument: Annotated[
        list[str] | None,
        typer.Option("--argument", help="Server argument for a drafted policy (repeatable)."),
    ] = None,
    allow_without_install_scripts: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-without-install-scripts",
            help="Accept that these packages run without the install scripts they declare: NAME[,NAME…] (repeatable).",
        ),
    ] = None,
    constraint: Annotated[
        list[str] | None,
        typer.Option(
            "--constraint",
            help="Narrow the resolver's choice: 'mcp<2' (PyPI) or 'content-type@^1' (npm) (repeatable).",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Draft the candidate as the next version of the existing policy --id (it keeps serving).",
        ),
    ] = False,
    mount: Annotated[
        list[str] | None,
        typer.Option(
            "--mount", help="HOST:SANDBOX[:ro|rw|rw+exec], a host directory for the server (repeatable)."
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="NAME=VALUE, or a credential by reference: NAME=env:HOST_VAR (never stored as a value) (repeatable).",
        ),
    ] = None,
    as_json: JsonFlag = False,
    entrypoint: Annotated[
        str | None,
        typer.Option(
            "--entrypoint", help="The command that starts the server, e.g. 'node node_modules/x/cli.js'."
        ),
    ] = None,
    host_program: Annotated[
        list[str] | None,
        typer.Option(
            "--host-program",
            help="An absolute path of a host program the server spawns (/usr/bin/git); replay pins its "
            "sha256 (repeatable).",
        ),
    ] = None,
) -> None:
    """Resolve the whole closure, fetch and check every package, write the bundle and the lock receipt."""
    from baton.gateway.artifacts import lock as lock_adapter
    from baton.gateway.lock_options import parse_options
    from baton.terminal import fail

    try:
        options = parse_options(list(mount or []), list(env or []), entrypoint, list(host_program or []))
    except BatonError as exc:
        fail(exc)

    _emit(
        "lock",
        _run(
            lock_adapter,
            target,
            adapter_id=adapter_id,
            arguments=list(argument or []),
            allow_without_install_scripts=[
                name.strip()
                for item in allow_without_install_scripts or []
                for name in item.split(",")
                if name.strip()
            ],
            constraints=list(constraint or []),
            replace=replace,
            options=options,
        ),
        as_json,
    )


@app.command()
def verify(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Run the independent (standard-library-only) verifier over the bundle."""
    from baton.gateway.stages import verify as verify_adapter

    _emit("verify", _run(verify_adapter, adapter), as_json)


@app.command()
def check(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Validate the policy and the lock and verifier receipts; runs nothing."""
    from baton.gateway.stages import check as check_adapter

    _emit("check", _run(check_adapter, adapter), as_json)


@app.command()
def replay(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    apply: Annotated[bool, typer.Option("--apply", help="Really start the server in the sandbox.")] = False,
    record_contract: Annotated[
        bool, typer.Option("--record-contract", help="Pin the observed contract into a draft policy.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Replay initialize + tools/list in the sandbox and compare the contract with the pins."""
    from baton.gateway.replay import replay as replay_adapter

    result = _run(replay_adapter, adapter, apply=apply, record=record_contract)
    result.pop("receipt", None)
    _emit("replay", result, as_json)


@app.command()
def promote(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    serve_nothing: Annotated[
        bool, typer.Option("--serve-nothing", help="Promote even though the policy allows no tool.")
    ] = False,
    accept_finding: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-finding", help="Accept this tool-poisoning finding by id (repeatable; receipted)."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Make the adapter live in baton serve (only after a passing replay under the current policy)."""
    from baton.gateway.promotion import promote as promote_adapter

    result = _run(
        promote_adapter, adapter, serve_nothing=serve_nothing, accept_findings=list(accept_finding or [])
    )
    _emit("promote", result, as_json)


policy_app = typer.Typer(
    help="The adapter's Cedar call policy: pin it, test it over recorded calls.", no_args_is_help=True
)
app.add_typer(policy_app, name="policy")


@policy_app.command("pin")
def policy_pin(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    source: Annotated[str | None, typer.Argument(help="A Cedar file (default: adapters/ID.cedar).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Check the Cedar policy parses and pin its sha256 in the adapter's policy (replay --apply next)."""
    from baton.gateway.cedar_policy import pin

    result = _run(pin, adapter, source)
    if as_json:
        _print(result)
        return
    typer.echo(
        f"pinned {result['policies']} Cedar polic(ies) for {result['adapter_id']}: {result['call_policy_sha256']}"
    )
    typer.echo(f"next: {result['next']}")


@policy_app.command("test")
def policy_test(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    calls: Annotated[str, typer.Argument(help="JSONL: one {tool, arguments, principal?} a line.")],
    as_json: JsonFlag = False,
) -> None:
    """Dry run: the pinned call policy's decision for each recorded call; nothing is called."""
    from baton.gateway.cedar_policy import test_calls
    from baton.redaction import redact_output

    result = _run(test_calls, adapter, calls)
    if as_json:
        _print(result)
        return
    for row in result["calls"]:
        extra = f" ({row['approvals']} approval(s))" if row.get("approvals") else ""
        why = row.get("reason") or ", ".join(row.get("reasons") or [])
        typer.echo(
            redact_output(f"{row['line']}: {row.get('tool', '?')}: {row['decision']}{extra}  {why}".rstrip())
        )


@app.command()
def diff(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Tools added, removed and changed between the served version and the next (a unified diff)."""
    from baton.gateway.diff import adapter_diff, summary_lines

    result = _run(adapter_diff, adapter)
    if as_json:
        _print(result)
        return
    from baton.redaction import redact_output

    for line in summary_lines(result):
        typer.echo(redact_output(line))


@app.command()
def allow(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    tools: Annotated[list[str], typer.Argument(help="Tools of the pinned contract to allow.")],
    approval: Annotated[
        bool, typer.Option("--approval", help="Each call of these tools waits for a human approval.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Allow tools (checked at once against the pinned contract); a new replay --apply makes it count."""
    from baton.gateway.allowlist import change_tools

    _emit("allow", _run(change_tools, adapter, list(tools), allow=True, approval=approval), as_json)


@app.command()
def deny(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    tools: Annotated[list[str], typer.Argument(help="Tools of the pinned contract to deny.")],
    as_json: JsonFlag = False,
) -> None:
    """Deny tools (checked at once against the pinned contract); a new replay --apply makes it count."""
    from baton.gateway.allowlist import change_tools

    _emit("deny", _run(change_tools, adapter, list(tools), allow=False), as_json)


@app.command()
def demote(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Take a promoted adapter out of service (its tools disappear from baton serve)."""
    from baton.gateway.promotion import demote as demote_adapter

    _emit("demote", _run(demote_adapter, adapter), as_json)


@app.command("list")
def list_adapters(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Every adapter with its state (drafted, locked, verified, replayed, promoted, blocked)."""
    from baton.gateway.stages import list_view
    from baton.terminal import print_table

    rows = _run(list_view)
    if as_json:
        _print(rows)
        return
    cells = []
    for row in rows:
        blocked = "blocked" in (row["state"], row.get("next_version_state"))
        reason = f"{row['error_class']}: {row['block_reason']}" if blocked else ""
        mounts = "; ".join(
            f"{m.get('host')} -> {m.get('sandbox')} ({m.get('mode', 'ro')})"
            for m in row.get("mounts") or []
            if isinstance(m, dict)
        )
        pinned = "pinned" if row["contract_pinned"] else "unpinned"
        constraints = ", ".join(str(c) for c in row.get("constraints") or [])
        shown = row["state"] + (
            f" (next: {row['next_version_state']})" if row.get("next_version_state") else ""
        )
        findings = ", ".join(f"{f.get('id')}" for f in row.get("poisoning_findings") or [])
        cells.append((row["adapter_id"], shown, pinned, mounts, constraints, findings, reason))
    print_table(("adapter", "state", "contract", "mounts", "constraints", "findings", "reason"), cells)
