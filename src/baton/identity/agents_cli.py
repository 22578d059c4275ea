"""``baton agents add NAME [--role observer] | list | revoke NAME``: a thin layer over :class:`AgentDirectory`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from baton.errors import BatonError
from baton.terminal import err, fail, open_runtime, out, print_json, print_table

app = typer.Typer(help="Named agents and their HTTP credentials.", no_args_is_help=True)


def _directory() -> Any:
    from baton.identity.agents import AgentDirectory

    return AgentDirectory(open_runtime().store)


@app.command("add")
def add(
    name: str,
    role: Annotated[
        str, typer.Option(help="agent (its own rows only) or observer (also sees every agent's rows).")
    ] = "agent",
) -> None:
    """Register an agent and print its bearer token once (only its hash is stored)."""
    try:
        token = _directory().add(name, role)
    except BatonError as exc:
        fail(exc)
    err.print(
        f"agent {name!r} ({role}) added. Its bearer token for /mcp is printed below, once; baton keeps only "
        "its hash. Give it to that agent (Authorization: Bearer …).",
        highlight=False,
    )
    out.print(token, highlight=False, soft_wrap=True)


@app.command("list")
def list_agents(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the registered agents (never a token)."""
    rows = _directory().list()
    if as_json:
        print_json(rows)
        return
    print_table(
        ("name", "role", "created", "revoked"),
        [(row["name"], row["role"], row["created_at"], row["revoked_at"] or "-") for row in rows],
    )


@app.command("revoke")
def revoke(name: str) -> None:
    """Revoke an agent's token: a running server refuses its next request (401)."""
    try:
        _directory().revoke(name)
    except BatonError as exc:
        fail(exc)
    out.print(f"agent {name!r} revoked", highlight=False)
