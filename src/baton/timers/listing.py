"""How a stored timer row is shown (tools, CLI, console), and which rows a list skips as unreadable."""

from __future__ import annotations

from typing import Any

from baton.store.rows import RowShape, Screened, load_json, screen


def present(row: Any) -> dict[str, Any]:
    """A stored timer as tools and the CLI show it."""
    last = None
    if row["last_due_at"]:
        last = {
            "due_at": row["last_due_at"],
            "fired_at": row["last_fired_at"],
            "fired_by": row["last_fired_by"],
            "missed": bool(row["last_missed"]),
            "outcome": row["last_outcome"],
            "error_class": row["last_error_class"],
        }
    return {
        "timer_id": row["id"],
        "name": row["name"],
        "schedule": row["schedule"],
        "interval_seconds": row["interval_seconds"],
        "action": row["action"],
        "status": row["status"],
        "next_fire_at": row["next_fire_at"],
        "first_fire_at": row["first_fire_at"],
        "fire_count": row["fire_count"],
        "created_at": row["created_at"],
        "cancelled_at": row["cancelled_at"],
        "last_firing": last,
        "agent": row["agent"],
    }


class ListedTimer(RowShape):
    """What a listed timer must hold (a stored row that does not is skipped, not listed)."""

    timer_id: str
    name: str
    schedule: str
    interval_seconds: float | None
    action: dict[str, Any]
    status: str
    next_fire_at: str | None
    first_fire_at: str
    fire_count: int
    created_at: str
    cancelled_at: str | None


def _listed(row: Any) -> dict[str, Any]:
    mapping = dict(row._mapping)
    mapping["action"] = load_json(mapping["action"], "action")
    return present(mapping)


def screen_timers(rows: Any) -> Screened:
    """Timers as listed, from rows read with the raw ``action``; a corrupted row is skipped with its reason."""
    return screen(rows, _listed, ListedTimer, id_key="timer_id", raw_id=lambda row: row.id)
