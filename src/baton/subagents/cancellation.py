"""The store side of a cancel: marking a subagent cancelled, seeing cancels another process made, and the
``subagent_cancelled`` receipt. Stopping the local task that runs it is the runner's."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from baton.errors import BatonError, SubagentError
from baton.evidence.receipts import utc_now
from baton.runtime import Runtime
from baton.store.schema import subagents
from baton.subagents import table
from baton.subagents.queries import hidden, not_found

log = logging.getLogger("baton.subagents")


def mark_cancelled(runtime: Runtime, subagent_id: str, agent: str | None = None) -> Any:
    """Mark an active subagent cancelled; returns its status, owner, lease and agent from before.

    Raises ``subagent_not_found`` (``agent``: only that agent's subagent) and ``subagent_already_terminal``.
    """
    now = utc_now()
    with runtime.store.write() as connection:
        row = connection.execute(
            select(
                subagents.c.status, subagents.c.owner, subagents.c.lease_expires_at, subagents.c.agent
            ).where(subagents.c.id == subagent_id)
        ).first()
        if row is None or hidden(row, agent):
            raise not_found(subagent_id)
        ended = table.end(
            connection,
            subagent_id,
            "cancelled",
            error="Cancelled on request.",
            error_class="subagent_cancelled",
            now=now,
            waiting_request_id=None,
        )
        if not ended:
            raise SubagentError(
                "subagent_already_terminal",
                f"The subagent is already {row.status}; nothing to cancel.",
                status=row.status,
            )
    return row


def cancelled_among(runtime: Runtime, subagent_ids: list[str]) -> Sequence[str]:
    """Which of ``subagent_ids`` are marked cancelled (by this process or another)."""
    with runtime.store.read() as connection:
        return (
            connection.execute(
                select(subagents.c.id).where(
                    subagents.c.id.in_(subagent_ids), subagents.c.status == "cancelled"
                )
            )
            .scalars()
            .all()
        )


def receipt_if_cancelled_elsewhere(runtime: Runtime, subagent_id: str) -> None:
    """A turn that ended just as another process cancelled it: this process receipts the cancel."""
    with runtime.store.read() as connection:
        status = table.status(connection, subagent_id)
    if status == "cancelled":
        cancel_receipt(runtime, subagent_id)


def cancel_receipt(runtime: Runtime, subagent_id: str) -> None:
    """Append ``subagent_cancelled`` (naming the subagent's agent); a refusal is logged, not raised."""
    with runtime.store.read() as connection:
        agent = connection.execute(select(subagents.c.agent).where(subagents.c.id == subagent_id)).scalar()
    try:
        runtime.receipts.append("subagent_cancelled", {"subagent_id": subagent_id, "agent": agent})
    except BatonError:
        log.exception("cancel receipt refused")
