"""Which paths told someone that a request waits (``reached_via``), and what the agent hears when none did.

A request goes out on whatever the asking client declared and the operator configured:

- ``url_elicitation`` / ``form_elicitation``: the client was asked to show the request (its URL points
  at the inbox, where a person decides; a form only ever answers a question, never an approval);
- ``tasks``: the call runs as an MCP task the client follows;
- ``mcp_apps``: the client renders the request card in the chat;
- ``progress``: the client asked for progress notifications, and each one says where to decide;
- ``notification`` (email, webhook, the desktop) and ``chat`` (Telegram, Slack, Discord);
- ``terminal``: the stderr line, only when stderr is a terminal someone looks at (on stdio it is the
  client's log file);
- ``console``: the HTTP server serves the inbox, where the line and every link point;
- ``mcp_decider``: MCP clients may decide (``BATON_HITL_ALLOW_MCP_DECISIONS``, the campaign runner's
  automated operator).

A request that reached nobody fails the asking call at once with ``hitl_unreachable`` (the request stays
pending: a person at the host can still decide it, and the agent can wait for it), unless the operator
chose ``BATON_HITL_UNREACHED=wait``.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select, update

from baton.boundary.toolkit import CallContext
from baton.errors import BatonError, HitlError
from baton.identity.public_url import link_base, request_page
from baton.runtime import Runtime
from baton.store.schema import hitl_requests

log = logging.getLogger("baton.hitl")

#: Every path, in the order results list them.
PATHS: tuple[str, ...] = (
    "url_elicitation",
    "form_elicitation",
    "tasks",
    "mcp_apps",
    "progress",
    "notification",
    "chat",
    "terminal",
    "console",
    "mcp_decider",
)
CHAT_CHANNELS = frozenset({"telegram", "slack", "discord"})
#: What an operator can set up so that the next request reaches someone (docs/hitl.md, "Reaching a person").
TO_CONFIGURE = (
    "run `baton serve --http` (or set BATON_PUBLIC_URL) so requests have a console page",
    "configure a notification channel (email, Telegram, Slack, Discord, webhook: docs/notifications.md)",
    "use a client that shows progress notifications, URL elicitation or MCP Apps",
)


def where_people_decide(runtime: Runtime, request_id: str) -> str:
    """Where a person decides a request: its inbox page when the HTTP server runs, else the CLI."""
    page = request_page(runtime, request_id)
    if page:
        return f"in the baton inbox at {page}"
    return f"with `baton hitl approve|reject|answer {request_id}` on the server's host"


def waiting_message(runtime: Runtime, view: dict[str, Any]) -> str:
    """The progress and log text while a call waits: what waits, and where and how a person decides."""
    request_id = view["request_id"]
    verb = "approve|reject" if view.get("kind") == "approval" else "answer"
    page = request_page(runtime, request_id)
    where = f"open {page}, or " if page else ""
    return (
        f"Waiting for a human decision on {request_id}: {where}run `baton hitl {verb} {request_id}` "
        "in a terminal on the server's host."
    )


def client_paths(ctx: CallContext, elicited: str | None, card: bool = False) -> list[str]:
    """The paths through the asking client: the elicitation offered, the task, the card, progress."""
    paths: list[str] = []
    if elicited is not None:
        paths.append(f"{elicited}_elicitation")
    if ctx.task is not None:
        paths.append("tasks")
    if card:
        paths.append("mcp_apps")
    if ctx.progress.wanted:
        paths.append("progress")
    return paths


def operator_paths(runtime: Runtime) -> list[str]:
    """The paths the operator set up: channels, the terminal (a real one), the console, MCP deciders."""
    from baton.hitl.announce import ANNOUNCER_SERVICE
    from baton.hitl.terminal_line import SERVICE as TERMINAL_SERVICE

    paths: list[str] = []
    announcer = runtime.services.get(ANNOUNCER_SERVICE)
    planned = getattr(announcer, "planned_channels", None)
    channels = list(planned()) if callable(planned) else []
    if any(channel not in CHAT_CHANNELS for channel in channels):
        paths.append("notification")
    if any(channel in CHAT_CHANNELS for channel in channels):
        paths.append("chat")
    terminal = runtime.services.get(TERMINAL_SERVICE)
    if terminal is not None and terminal.reaches_a_person():
        paths.append("terminal")
    if link_base(runtime):
        paths.append("console")
    if runtime.settings.baton_hitl_allow_mcp_decisions:
        paths.append("mcp_decider")
    return paths


def in_order(paths: list[str]) -> list[str]:
    """The paths once each, in :data:`PATHS` order."""
    present = set(paths)
    return [path for path in PATHS if path in present]


def record(runtime: Runtime, request_id: str, paths: list[str]) -> list[str]:
    """Store the request's paths (each once, in order) and return them."""
    ordered = in_order(paths)
    statement = update(hitl_requests).where(hitl_requests.c.id == request_id).values(reached_via=ordered)
    try:
        with runtime.store.write() as connection:
            connection.execute(statement)
    except BatonError:
        log.exception("recording how request %s went out failed", request_id)
    return ordered


def settle(runtime: Runtime, request_id: str, deliveries: list[dict[str, Any]]) -> None:
    """Once the channels answered: a notification or chat path none of whose channels delivered is dropped."""
    delivered = {str(d.get("channel")) for d in deliveries if d.get("success")}
    tried = {str(d.get("channel")) for d in deliveries}
    dropped: set[str] = set()
    if tried - CHAT_CHANNELS and not delivered - CHAT_CHANNELS:
        dropped.add("notification")
    if tried & CHAT_CHANNELS and not delivered & CHAT_CHANNELS:
        dropped.add("chat")
    if not dropped:
        return
    with runtime.store.read() as connection:
        stored = connection.execute(
            select(hitl_requests.c.reached_via).where(hitl_requests.c.id == request_id)
        ).scalar()
    from baton.hitl.records import row_paths

    record(runtime, request_id, [p for p in row_paths(stored) if p not in dropped])


def unreached(runtime: Runtime, view: dict[str, Any], resumable: bool = True) -> HitlError:
    """The asking call's answer when nothing told anyone: what waits, who can still decide, what to set up.

    A resumable request (an agent's question) stays pending for a person at the host; a gateway call's
    is withdrawn by its caller, since the call it would have allowed is not made."""
    request_id = view["request_id"]
    then = (
        f"Nothing is approved. A person can still decide it {where_people_decide(runtime, request_id)}; "
        "then call mcp_wait_for_request."
        if resumable
        else "The call was not made and the request is withdrawn."
    )
    message = (
        f"Nobody was told that request {request_id} waits: this client asked for no progress, elicitation, "
        f"task or card, and no channel or console is set up. {then} To reach someone next time, the "
        "operator can: " + "; ".join(TO_CONFIGURE) + "."
    )
    return HitlError(
        "hitl_unreachable",
        message,
        request_id=request_id,
        status="pending" if resumable else "withdrawn",
        reached_via=[],
        expires_at=view.get("expires_at"),
    )


def refuses_unreached(runtime: Runtime) -> bool:
    """Whether a request that reached nobody fails its asking call at once (the default)."""
    return runtime.settings.baton_hitl_unreached != "wait"
