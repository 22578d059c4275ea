"""The terminal every ``baton`` command shares: one stdout console, one stderr console, one output mode.

On a terminal, output is rich (colour, tables with borders, wrapped to the window). On a pipe it is
plain and stable: no colour, no borders, never wrapped or cut, one row per line, so ``| cat``,
``| grep`` and ``| cut`` see the same lines every time. Listings also take ``--json``.
The subsystem CLIs (``baton.hitl.cli``, ``baton.gateway.cli`` …) import from here, never from
:mod:`baton.cli`, which only assembles them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from baton.errors import BatonError
from baton.terminal_text import printable, printable_json

if TYPE_CHECKING:
    from rich.progress import Progress

#: A pipe is "as wide as it needs": nothing is wrapped or cut with an ellipsis.
PIPE_WIDTH = 1_000_000


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True, highlight=False, emoji=False)


out = _console(stderr=False)
err = _console(stderr=True)


def is_tty(stderr: bool = False) -> bool:
    """Whether stdout (or stderr) is a terminal a person is looking at."""
    return (sys.stderr if stderr else sys.stdout).isatty()


def open_runtime() -> Any:
    """The runtime for a CLI command (imported late to keep ``--help`` fast)."""
    from baton.runtime import Runtime

    return Runtime.open()


def fail(exc: BatonError) -> NoReturn:
    """Print a typed error on stderr and exit 1 (the message may quote an agent's text: made printable)."""
    err.print(f"[red]{exc.error_class}[/red]: {escape(printable(exc.message))}")
    raise typer.Exit(1)


def print_json(value: Any) -> None:
    """Machine-readable output on stdout (highlighted on a terminal, plain on a pipe), redacted, with no
    character a terminal acts on (:func:`baton.terminal_text.printable_json`)."""
    from baton.evidence.redaction import redact_output

    text = printable_json(redact_output(value))
    if out.is_terminal:  # not out.print_json: it would load and dump the escapes away again
        from rich.highlighter import JSONHighlighter
        from rich.text import Text

        out.print(JSONHighlighter()(Text(text)), soft_wrap=True)
    else:
        print(text, flush=True)


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None, *, markup: bool = False
) -> None:
    """A table: bordered on a terminal; on a pipe, aligned plain columns with one row per line.

    Cells are text (``[…]`` is shown as is) unless ``markup`` says they carry rich markup; every cell is
    redacted like any CLI output and made printable (an agent's ESC, CR, LF or RLO is shown escaped, so it
    neither drives the terminal nor breaks the row).
    """
    from baton.evidence.redaction import redact_output

    rows = [[printable(redact_output(cell)) for cell in row] for row in rows]
    headers = [_column(name, [row[index] for row in rows]) for index, name in enumerate(columns)]
    if out.is_terminal:
        table = Table(*headers, title=title)
    else:
        table = Table(*headers, box=None, show_edge=False, pad_edge=False, title=title)
    for row in rows:
        table.add_row(*(cell if markup else escape(cell) for cell in row))
    if out.is_terminal:
        out.print(table)
        return
    with out.capture() as captured:
        out.print(table)
    print("\n".join(line.rstrip() for line in captured.get().splitlines()), flush=True)


def _column(name: str, cells: Sequence[str]) -> Column:
    """A column; one of ids (``id``, ``*_id``, ``seq``, ``sha256``) is never wrapped nor cut, so the value a
    person must type stays whole and other columns wrap first."""
    if name == "seq" or name == "sha256" or name == "id" or name.endswith("_id"):
        widest = max([len(name), *(len(cell) for cell in cells)])
        return Column(name, no_wrap=True, min_width=widest)
    return Column(name, overflow="fold")


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Progress | None]:
    """A progress display on stderr while long work runs, only when stderr is a terminal.

    Yields the :class:`rich.progress.Progress` (a task named ``work`` is task 0) or ``None``
    on a pipe, where nothing is drawn.
    """
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f}")]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        bar.add_task(description, total=total)
        yield bar


def _flags_take_no_value() -> None:
    """typer's rich help shows a flag as ``--help <bool>``; a flag takes no value, so show no type."""
    from typer.core import TyperOption

    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and not self.count:
            return None
        return original(self, ctx)

    setattr(TyperOption, "display_type_rich", display_type_rich)  # noqa: B010 (mypy refuses a method assignment)


_flags_take_no_value()
