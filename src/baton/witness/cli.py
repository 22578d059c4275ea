"""``baton witness serve | log-key``: run a witness for another baton's checkpoints, print this baton's log key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from baton.errors import BatonError
from baton.terminal import err, fail, out

app = typer.Typer(help="Witnesses that cosign receipt checkpoints (docs/receipts.md).", no_args_is_help=True)


@app.command("serve")
def serve(
    log_key: Annotated[
        list[str],
        typer.Option("--log-key", help="A log's verifier key (`baton witness log-key` on its host)."),
    ],
    name: Annotated[str, typer.Option(help="This witness's key name, e.g. witness.example.org/w1.")],
    bind: Annotated[str, typer.Option(help="HOST:PORT to listen on.")] = "127.0.0.1:8441",
    home: Annotated[
        Path | None, typer.Option(help="The witness's own directory (default: BATON_HOME/witness).")
    ] = None,
) -> None:
    """Serve tlog-witness add-checkpoint: cosign a log's checkpoint only when it extends the last one."""
    from baton.config import load_settings
    from baton.witness.serving import run

    try:
        run(home or load_settings().home / "witness", name, log_key, bind)
    except BatonError as exc:
        fail(exc)


@app.command("log-key")
def log_key() -> None:
    """Print this baton's checkpoint key as a signed-note verifier key (public), for `witness serve --log-key`."""
    from baton.evidence.checkpoints import load_or_create_key
    from baton.evidence.witnessing import log_key as verifier_key
    from baton.terminal import open_runtime

    settings = open_runtime().settings
    try:
        out.print(
            verifier_key(settings, load_or_create_key(settings)).encode(), highlight=False, soft_wrap=True
        )
    except BatonError as exc:
        fail(exc)
    if sys.stdout.isatty():
        err.print("pass it to `baton witness serve --log-key` on the witness's host", highlight=False)
