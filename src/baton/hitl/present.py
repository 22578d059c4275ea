"""What a person deciding a request is shown: who asked, the risk, the arguments and their digest, the
context rendered safely, the time left and whether a waiting call was told.

Nothing here decides anything; it turns a request's view (``baton.hitl.records.row_view``) into what the
inbox and console templates lay out. Markdown is rendered by ``markdown-it-py`` with raw HTML off, then
sanitized by ``nh3`` (an allow-list of tags and attributes; links only to http, https and mailto), so an
agent's context can never put a script, an event handler or a ``javascript:`` link on the page.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

from baton import clock
from baton.hitl.titles import plain

#: Context keys the gateway writes beside the arguments (shown as "who" and "risk", not as context).
GATEWAY_KEYS = frozenset(
    {"adapter_id", "tool", "arguments", "arguments_sha256", "subagent_id", "parent_agent"}
)
#: Tags the sanitized markdown may keep: text structure, code, tables and links; no images (the CSP loads
#: nothing remote), no forms, no frames, no style.
MARKDOWN_TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
        "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
MARKDOWN_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
#: What makes a string read as markdown: a heading, a list, a quote, a fence, a table row, a link, emphasis.
MARKDOWN_SIGNS = re.compile(
    r"(?m)^(?:#{1,6} \S|[-*+] \S|\d{1,3}[.)] \S|> \S|```|\|.*\|\s*$)|\[[^\]\n]+\]\([^)\s]+\)|\*\*[^*\n]+\*\*"
)
#: Tool annotations shown to the decider, in this order, with how a true value reads.
HINTS = (
    ("destructiveHint", "destructive", "bad"),
    ("readOnlyHint", "read-only", "ok"),
    ("idempotentHint", "idempotent", "neutral"),
    ("openWorldHint", "open world", "warn"),
)


def looks_like_markdown(text: str) -> bool:
    """Whether a string is written in markdown (it is then rendered, with its source one click away)."""
    return bool(MARKDOWN_SIGNS.search(text))


def render_markdown(text: str) -> Markup:
    """``text`` as sanitized HTML: markdown-it-py (raw HTML off) then nh3 (allow-listed tags and schemes)."""
    import nh3
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough").render(text)
    clean = nh3.clean(
        rendered,
        tags=set(MARKDOWN_TAGS),
        attributes={tag: set(names) for tag, names in MARKDOWN_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
    )
    return Markup(clean)  # noqa: S704 - sanitized by nh3 just above


def hides_text(text: str) -> bool:
    """Whether rendering the markdown loses words of its source (an image's alt text, a link reference
    definition, a link's title): the page then shows the source unfolded, so nothing goes unseen."""
    source = re.sub(r"\]\([^)\s]*\)", "]", text)  # a link's address is its href, not lost text
    shown = set(re.findall(r"\w+", plain(text)))
    return any(word not in shown for word in re.findall(r"\w+", source))


def pretty(value: Any) -> str:
    """A JSON value indented for reading (strings are shown as text elsewhere, with their line breaks)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False)


def time_left(expires_epoch: float, now: float | None = None) -> str:
    """``4 min 32 s`` until the expiry, or ``expired`` (the page's script keeps it current)."""
    left = int(expires_epoch - (clock.time() if now is None else now))
    if left <= 0:
        return "expired"
    days, rest = divmod(left, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


def gateway_call(view: dict[str, Any]) -> bool:
    """Whether the request is a gateway call approval (the server wrote it; an agent cannot claim it)."""
    return bool((view.get("provenance") or {}).get("adapter_id"))


def who(view: dict[str, Any]) -> list[tuple[str, str]]:
    """Who asked, as label and value: the agent, the MCP client, the subagent and the agent that spawned it."""
    origin = view.get("provenance") or {}
    facts = [("Agent", view.get("agent") or "an unnamed agent (the operator's own tools)")]
    if origin.get("client"):
        facts.append(("Client", str(origin["client"])))
    if origin.get("subagent_id"):
        facts.append(("Subagent", str(origin["subagent_id"])))
        facts.append(("Spawned by", str(origin.get("parent_agent") or view.get("agent") or "unknown")))
    return facts


def risk(view: dict[str, Any]) -> dict[str, Any]:
    """The request's risk: the adapter's risk class and the tool's annotations (a gateway call), and the
    request's own rules (urgent, step-up, quorum)."""
    origin = view.get("provenance") or {}
    found = origin.get("annotations")
    annotations: dict[str, Any] = found if isinstance(found, dict) else {}
    hints = [
        {"name": name, "label": label, "tone": tone, "value": annotations[name]}
        for name, label, tone in HINTS
        if name in annotations
    ]
    level = origin.get("risk_class")
    return {
        "gateway": gateway_call(view),
        "adapter_id": origin.get("adapter_id"),
        "tool": origin.get("tool"),
        "risk_class": level if level in ("low", "medium", "high") else None,
        "hints": hints,
        "title": annotations.get("title") if isinstance(annotations.get("title"), str) else None,
    }


def arguments(view: dict[str, Any]) -> tuple[Any, str]:
    """What the decision is bound to and how the page names it: a gateway call's arguments, or the
    request's context (its digest is what an approval's step-up binds)."""
    context = view.get("context")
    if gateway_call(view) and isinstance(context, dict):
        return context.get("arguments"), "Arguments"
    return context, "Context"


def extra_context(view: dict[str, Any]) -> dict[str, Any] | None:
    """A gateway call's context beyond its arguments and the fields shown as who and risk."""
    context = view.get("context")
    if not gateway_call(view) or not isinstance(context, dict):
        return None
    rest = {key: value for key, value in context.items() if key not in GATEWAY_KEYS}
    return rest or None


def told(view: dict[str, Any]) -> str | None:
    """Whether the decision reached a waiting call, truthfully, or None while undecided."""
    if view["status"] == "expired":
        return "Nobody decided in time; the request expired and nothing was approved."
    if not view.get("responded_at"):
        return None
    if view.get("waiter_gone") is False:
        return "The waiting call was told at once."
    if view.get("waiter_gone") is True:
        return (
            "No call was waiting when this was decided: the agent reads the decision when it next asks "
            "(mcp_get_request_status or mcp_wait_for_request)."
        )
    return "Recorded."


#: How much of a message, and of a context as compact JSON, a list row shows whole.
LIST_MESSAGE = 300


def compact(value: Any) -> str:
    """A JSON value on one line, as written (a list row's short context)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def whole_in_list(view: dict[str, Any]) -> bool:
    """Whether a list row shows the whole request (a short message, no context or a short one, shown in
    the row), so that approving or answering from the row approves nothing unseen; otherwise the row
    links to the request page."""
    context = view.get("context")
    short = context is None or len(compact(context)) <= LIST_MESSAGE
    message = view.get("message") or ""
    as_written = plain(message) == " ".join(message.split())  # the title hides no markdown
    return len(message) <= LIST_MESSAGE and short and as_written


def filters() -> dict[str, Any]:
    """The template filters and tests this module provides."""
    return {
        "markdown": render_markdown,
        "pretty": pretty,
        "compact": compact,
        "plain": plain,
        "time_left": time_left,
    }
