"""The plain text that tells a person about a request: its announcement and the facts every
notification about it repeats (the escalation steps' too). No I/O and no heavy imports: the broker's
escalation imports it at start-up."""

from __future__ import annotations

import json
from typing import Any

#: How much of a request's context a notification body carries.
CONTEXT_MAX_CHARS = 1500
#: A notification title's one-line excerpt of the request's message.
HEADLINE_CHARS = 80


def announcement_text(request: dict[str, Any], link: str | None) -> tuple[str, str]:
    """The subject line and plain-text body announcing a request."""
    kind = "Approval" if request.get("kind") == "approval" else "Input"
    urgent = "URGENT: " if request.get("urgent") else ""
    message = str(request.get("message", ""))
    headline = one_line(message, HEADLINE_CHARS)
    title = f"[baton] {urgent}{kind} requested: {headline}"
    # the title already says a short one-line message; the body repeats it only when the title cut it
    lines = [] if headline == message else [message, ""]
    return title, "\n".join(lines + request_lines(request, link))


def request_lines(request: dict[str, Any], link: str | None) -> list[str]:
    """A request's facts and where to decide it, as lines of a notification's plain-text body."""
    lines = [f"Request: {request.get('request_id')}"]
    if request.get("agent"):
        lines.append(f"Asked by agent: {request['agent']}")
    if request.get("expires_at"):
        lines.append(f"Expires: {request['expires_at']}")
    if request.get("options"):
        lines.append("Options: " + ", ".join(str(o) for o in request["options"]))
    if request.get("context"):
        context = json.dumps(request["context"], ensure_ascii=False, indent=2, default=str)
        lines += ["", "Context:", context[:CONTEXT_MAX_CHARS]]
    lines.append("")
    if link:
        lines.append(f"Decide in the inbox: {link}")
    elif request.get("kind") == "approval":
        lines.append(f"Decide with: baton hitl approve|reject {request.get('request_id')}")
    else:
        lines.append(f"Answer with: baton hitl answer {request.get('request_id')} TEXT")
    return lines


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
