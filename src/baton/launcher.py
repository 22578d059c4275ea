"""The ``baton`` entry point: ``baton serve`` starts without loading the CLI framework.

Every other command goes to the typer app in :mod:`baton.cli`; ``serve`` is parsed here with argparse
(the same options) because an MCP client spawns it on every start and waits for ``initialize``.
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    """Dispatch ``serve`` on the fast path, everything else to the full CLI."""
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        parser = argparse.ArgumentParser(prog="baton serve", add_help=False)
        parser.add_argument("--http", default=None)
        parser.add_argument("--stateless", action="store_true")
        parser.add_argument("--conformance-fixtures", action="store_true")
        parser.add_argument("--experimental-events", action="store_true")
        known, rest = parser.parse_known_args(argv[1:])
        if not rest:
            from baton.wire import heap

            heap.pause()  # resumed once the registry is loaded (baton.wire.heap)
            from baton.serve import run_serve

            raise SystemExit(
                run_serve(known.http, known.stateless, known.conformance_fixtures, known.experimental_events)
            )
    from baton.cli import main as cli_main

    cli_main()
