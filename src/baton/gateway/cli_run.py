"""How each ``baton gateway`` command runs the core: a runtime, a progress display, failures, results.

Every command of :mod:`baton.gateway.cli` goes through :func:`run` and prints with :func:`emit` or
:func:`print_result`, so no command opens a runtime, catches an error or shows a failure itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from baton.errors import BatonError

#: How much of a failed server's stderr the terminal shows (the receipt keeps its last 2 KiB).
STDERR_LINES_SHOWN = 12
STDERR_LINE_CHARS = 200


#: How the replay ended when baton stopped the server itself (its exit status is then baton's signal).
KILLED_BY_BATON = {
    "terminated_after_replay_error": "killed by baton (SIGTERM)",
    "killed_after_replay_error": "killed by baton (SIGKILL)",
}


def exit_reason(details: dict[str, Any]) -> str | None:
    """Why the server's process ended, in words: its own exit status, or baton's kill and what caused it."""
    code = details.get("process_exit_code")
    killed = KILLED_BY_BATON.get(str(details.get("shutdown_mode")))
    if killed is not None:
        cause = (
            "the server wrote a non-JSON line to stdout"
            if details.get("stdout_line") is not None
            else "the replay failed"
        )
        return f"exit: {killed} after {cause}"
    if code is None:
        return None
    if isinstance(code, int) and code < 0:
        return f"exit: the server was killed by signal {-code}"
    return f"exit status: {code}"


def explain(exc: BatonError) -> list[str]:
    """The lines under a stage failure: the offending stdout line, why the server ended, its error line
    and last stderr lines, the receipt, and the next step that works."""
    from baton.evidence.redaction import redact_output

    details = exc.details
    lines = []
    noise = details.get("stdout_noise") or []
    if noise:
        lines.append(
            f"the server wrote {len(noise)} non-JSON line(s) to stdout before its first JSON-RPC message "
            f"(tolerated), the first: {redact_output(noise[0])}"
        )
    if details.get("stdout_line") is not None:
        lines.append(f"the line on stdout: {redact_output(details['stdout_line'])}")
    reason = exit_reason(details)
    if reason is not None:
        lines.append(reason)
    if details.get("stderr_headline"):
        lines.append(f"the server's error: {redact_output(details['stderr_headline'])}")
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
    if details.get("next"):
        lines.append(f"next: {redact_output(details['next'])}")
    return lines


def _fail(exc: BatonError) -> Any:
    from rich.markup import escape

    from baton.terminal import err
    from baton.terminal_text import printable

    err.print(f"[red]{exc.error_class}[/red]: {escape(printable(exc.message))}")
    for line in explain(exc):  # the upstream server's stderr is its text, not ours: made printable
        err.print(escape(printable(line)), highlight=False, soft_wrap=True)
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


def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(runtime, ...)`` on a fresh runtime; a failure is explained on stderr and exits 1."""
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


def advised(fn: Any, advise: Callable[[BatonError], str | None]) -> Any:
    """``fn`` whose failures carry the command that fixes them (``next``), unless they name one already."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BatonError as exc:
            step = None if exc.details.get("next") else advise(exc)
            if step:
                exc.details["next"] = step
            raise

    call.__name__ = fn.__name__
    return call


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")]


def print_result(value: Any) -> None:
    """The result as JSON on stdout (``--json``)."""
    from baton.terminal import print_json

    print_json(value)


def emit(command: str, result: dict[str, Any], as_json: bool) -> None:
    """The full result as JSON with ``--json``; else a short summary ending with the next command."""
    if as_json:
        print_result(result)
        return
    from baton.evidence.redaction import redact_output
    from baton.gateway.summary import summarize
    from baton.terminal_text import printable

    for line in summarize(command, result):
        typer.echo(printable(redact_output(line)))
