"""The hook that tells people about a new request: whatever ``runtime.services["hitl_announcer"]`` holds.

The notifications subsystem publishes an object with ``announce(request, link)``; the broker calls it
once per new request in the background. Its failure (an exception, a timeout, a malformed answer) is
logged and recorded, and never touches the request itself: a channel-less broker works the same.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

from baton.errors import BatonError
from baton.runtime import Runtime

log = logging.getLogger("baton.hitl")

ANNOUNCER_SERVICE = "hitl_announcer"
ANNOUNCE_TIMEOUT_SECONDS = 120.0
LINK_PLACEHOLDER = "[SIGNED-LINK]"


@runtime_checkable
class HitlAnnouncer(Protocol):
    """Tells every configured channel about a new request; returns one delivery record per channel."""

    async def announce(self, request: dict[str, Any], link: str | None) -> list[dict[str, Any]]:
        """Announce ``request`` (as listed by mcp_list_pending_requests) with an optional signed link."""
        ...


async def announce_safely(
    runtime: Runtime, request: dict[str, Any], link: str | None
) -> list[dict[str, Any]]:
    """Call the announcer if one is registered; never raises; records an ``hitl_announced`` receipt."""
    import anyio

    announcer = runtime.services.get(ANNOUNCER_SERVICE)
    if announcer is None:
        return []
    try:
        with anyio.fail_after(ANNOUNCE_TIMEOUT_SECONDS):
            answer = await announcer.announce(dict(request), link)
        deliveries = [dict(item) for item in answer]
    except Exception as exc:  # any failure of the announcer stays out of the request
        log.warning("announcing request %s failed: %s", request.get("request_id"), type(exc).__name__)
        deliveries = [
            {
                "channel": "announcer",
                "success": False,
                "error_class": "notification_delivery_failed",
                "error": f"The announcer failed ({type(exc).__name__}).",
            }
        ]
    recorded = [without_link(item, link) for item in deliveries]
    try:
        runtime.receipts.append(
            "hitl_announced",
            {"request_id": request.get("request_id"), "link_sent": link is not None, "deliveries": recorded},
        )
    except BatonError:
        log.exception("hitl_announced receipt refused")
    return deliveries


def without_link(value: Any, link: str | None) -> Any:
    """The link is a capability: neither it nor its signature ever goes into a receipt."""
    if not link:
        return value
    from urllib.parse import parse_qs, urlsplit

    signature = parse_qs(urlsplit(link).query).get("s", [""])[0]
    if isinstance(value, str):
        value = value.replace(link, LINK_PLACEHOLDER)
        return value.replace(signature, LINK_PLACEHOLDER) if signature else value
    if isinstance(value, dict):
        return {key: without_link(item, link) for key, item in value.items()}
    if isinstance(value, list):
        return [without_link(item, link) for item in value]
    return value
