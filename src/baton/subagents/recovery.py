"""Orphan recovery and lease renewal: a subagent whose owning process is gone is failed, and the ones a
live process runs keep their lease (see :mod:`baton.store.leases`)."""

from __future__ import annotations

from sqlalchemy import select, update

from baton.evidence.receipts import utc_now
from baton.runtime import Runtime
from baton.store.leases import lease_until, owner_is_gone
from baton.store.schema import subagents
from baton.subagents import table
from baton.subagents.states import ACTIVE


def recover_orphans(runtime: Runtime) -> int:
    """Fail the subagents whose owning process is gone (restart, crash, dead replica); returns how many."""
    with runtime.store.read() as connection:
        candidates = connection.execute(
            select(subagents.c.id, subagents.c.owner, subagents.c.lease_expires_at).where(
                subagents.c.status.in_(ACTIVE)
            )
        ).all()
    orphans = [
        row.id for row in candidates if owner_is_gone(row.owner, row.lease_expires_at, me=runtime.instance_id)
    ]
    now = utc_now()
    failed = 0
    for subagent_id in orphans:
        with runtime.store.write() as connection:
            error = "The process running this subagent stopped."
            if table.end(
                connection, subagent_id, "failed", error=error, error_class="interrupted_by_restart", now=now
            ):
                failed += 1
                runtime.receipts.append_in(connection, "subagent_interrupted", {"subagent_id": subagent_id})
    return failed


def renew_leases(runtime: Runtime) -> None:
    """Extend the lease of every active subagent this process owns."""
    with runtime.store.write() as connection:
        connection.execute(
            update(subagents)
            .where(subagents.c.owner == runtime.instance_id, subagents.c.status.in_(ACTIVE))
            .values(lease_expires_at=lease_until())
        )
