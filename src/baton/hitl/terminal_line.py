"""One stderr line per new request while ``baton serve`` runs, so the person at that terminal learns that a
request waits even when no notification channel is configured (the README's quick start).

The line names the asking agent, the request's title (its markdown as plain text, cut at 100 characters,
as every list shows it: :func:`baton.hitl.titles.terminal_title`) and where to decide it: the inbox page
when the HTTP server's address is known, else ``baton hitl show ID``. The message comes from the agent, so
control characters (a terminal escape sequence could rewrite the screen) are shown escaped
(:func:`baton.terminal_text.printable`, the sanitizer every CLI output shares). stdout is never
touched: on stdio it carries JSON-RPC only. ``BATON_ANNOUNCE_ON_TERMINAL=0`` turns it off.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from baton.hitl.titles import terminal_title
from baton.runtime import Runtime
from baton.terminal_text import printable

SERVICE = "terminal_announcer"
MAX_TITLE_CHARS = 100


def request_line(view: dict[str, Any], base_url: str | None) -> str:
    """The line announcing ``view`` (a request as the broker returns it)."""
    title = terminal_title(str(view.get("message", "")))
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1] + "…"
    request_id = view["request_id"]
    where = (
        f"{base_url.rstrip('/')}/inbox/requests/{request_id}" if base_url else f"baton hitl show {request_id}"
    )
    expires = datetime.fromtimestamp(float(view["expires_epoch"]), UTC).strftime("%H:%M:%S UTC")
    kind = "approval" if view.get("kind") == "approval" else "input"
    agent = printable(str(view.get("agent") or "an agent"))
    urgent = "URGENT " if view.get("urgent") else ""
    return f"baton: {urgent}{kind} requested by {agent}: {title} | decide: {where} | expires {expires}"


class TerminalAnnouncer:
    """Writes :func:`request_line` for each new request to a stream (stderr)."""

    def __init__(self, runtime: Runtime, stream: TextIO | None = None) -> None:
        self.runtime = runtime
        self.stream = stream

    def reaches_a_person(self) -> bool:
        """Whether the line lands on a terminal (on stdio, stderr is the client's log file: nobody reads it)."""
        stream = self.stream or sys.stderr
        try:
            return bool(stream.isatty())
        except (OSError, ValueError):
            return False

    def announce(self, view: dict[str, Any]) -> None:
        """Write the line; a closed or broken stream never breaks the request."""
        from baton.identity.public_url import link_base

        stream = self.stream or sys.stderr
        try:
            stream.write(request_line(view, link_base(self.runtime)) + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass


def install(runtime: Runtime) -> None:
    """Announce new requests on stderr for as long as this runtime serves (unless turned off)."""
    if runtime.settings.baton_announce_on_terminal:
        runtime.services[SERVICE] = TerminalAnnouncer(runtime)
