"""TimerService details the end-to-end tests pass over: listing, cancel errors, and which mirror entries a
fresh store adopts (these tests kill mutants mutmut found surviving in baton/timers/service.py, whose
adoption rules are now in baton/timers/mirror.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import Settings
from baton.errors import TimerError
from baton.runtime import Runtime
from baton.timers import mirror
from baton.timers.schedule import MIN_INTERVAL_SECONDS
from baton.timers.service import TimerRequest, TimerService

RECORD = {"kind": "record"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[TimerService]:
    runtime = Runtime.open(
        Settings(baton_home=tmp_path / "home", timer_storage_path=tmp_path / "timers.json")
    )
    yield TimerService(runtime)
    runtime.close()


def test_list_is_in_setting_order_and_filters_by_status(service: TimerService) -> None:
    ids = [
        service.set(TimerRequest(name=f"t{i}", action=RECORD, delay_seconds=60))["timer_id"] for i in range(5)
    ]
    service.cancel(ids[1])
    assert [t["timer_id"] for t in service.list()] == ids
    assert [t["timer_id"] for t in service.list("cancelled")] == [ids[1]]
    assert [t["timer_id"] for t in service.list("active")] == [i for i in ids if i != ids[1]]
    assert {t["name"] for t in service.list()} == {f"t{i}" for i in range(5)}


def test_cancel_records_when_and_refuses_with_the_timer_named(service: TimerService) -> None:
    timer = service.set(TimerRequest(name="x", action=RECORD, delay_seconds=60, agent="ops"))
    with pytest.raises(TimerError) as theirs:  # another agent's timer reads as unknown, and stays active
        service.cancel(timer["timer_id"], agent="someone-else")
    assert theirs.value.error_class == "timer_not_found"
    cancelled = service.cancel(timer["timer_id"], agent="ops")
    assert cancelled["success"] is True
    assert cancelled["status"] == "cancelled" and cancelled["next_fire_at"] is None
    receipts = [r.payload for r in service.runtime.receipts.list(kind="timer_cancelled")]
    assert receipts == [{"timer_id": timer["timer_id"], "name": "x", "agent": "ops"}]
    assert cancelled["cancelled_at"] and cancelled["cancelled_at"] >= timer["created_at"]
    with pytest.raises(TimerError) as again:
        service.cancel(timer["timer_id"])
    assert again.value.error_class == "timer_already_cancelled"
    assert again.value.details["timer_id"] == timer["timer_id"] and again.value.message
    with pytest.raises(TimerError) as unknown:
        service.cancel("tm_missing")
    assert unknown.value.error_class == "timer_not_found"
    assert unknown.value.details["timer_id"] == "tm_missing" and "tm_missing" in unknown.value.message


def test_a_completed_timer_refuses_cancel_naming_its_status(service: TimerService) -> None:
    from datetime import timedelta

    from baton.timers.schedule import now_utc

    timer = service.set(TimerRequest(name="once", action=RECORD, delay_seconds=1))
    claim = service.claim(
        timer["timer_id"], timer["next_fire_at"], now_utc() + timedelta(seconds=2), missed=False
    )
    assert claim is not None
    with pytest.raises(TimerError) as refused:
        service.cancel(timer["timer_id"])
    assert refused.value.error_class == "timer_already_completed"
    assert refused.value.details == {"timer_id": timer["timer_id"], "status": "completed"}
    assert "already fired" in refused.value.message


def test_a_claim_takes_only_the_named_timer_and_carries_missed(service: TimerService) -> None:
    """Two timers due at the same instant: claiming one leaves the other due."""
    from datetime import timedelta

    from sqlalchemy import update

    from baton.store.schema import timers
    from baton.timers.schedule import parse_time

    first, second = (service.set(TimerRequest(name=n, action=RECORD, delay_seconds=60)) for n in "ab")
    due = first["next_fire_at"]
    with service.runtime.store.write() as connection:
        connection.execute(update(timers).values(next_fire_at=due))
    claim = service.claim(second["timer_id"], due, parse_time(due) + timedelta(seconds=2), missed=True)
    assert claim is not None
    assert (claim.timer_id, claim.name, claim.missed) == (second["timer_id"], "b", True)
    untouched = service.get(first["timer_id"])
    assert (untouched["status"], untouched["next_fire_at"], untouched["fire_count"]) == ("active", due, 0)


def entry(**changes: Any) -> dict[str, Any]:
    base = {
        "id": "tm_valid",
        "name": "valid",
        "schedule": "once",
        "interval_seconds": None,
        "action": RECORD,
        "status": "active",
        "first_fire_at": "2999-01-01T09:00:00.000000+00:00",
        "next_fire_at": "2999-01-01T09:00:00.000000+00:00",
        "created_at": "2026-01-01T00:00:00.000000+00:00",
        "updated_at": "2026-01-01T00:00:00.000000+00:00",
    }
    return {**base, **changes}


MALFORMED = {
    "no name": entry(id="tm_a", name=""),
    "unknown status": entry(id="tm_b", status="paused"),
    "unknown schedule": entry(id="tm_c", schedule="cron"),
    "interval too short": entry(id="tm_d", schedule="interval", interval_seconds=0.01),
    "interval a boolean": entry(id="tm_e", schedule="interval", interval_seconds=True),
    "interval a string": entry(id="tm_f", schedule="interval", interval_seconds="60"),
    "interval missing": entry(id="tm_g", schedule="interval"),
    "bad action": entry(id="tm_h", action={"kind": "launch"}),
    "bad time": entry(id="tm_i", next_fire_at="next tuesday"),
    "naive time": entry(id="tm_j", first_fire_at="2999-01-01T09:00:00"),
    "active without a due time": entry(id="tm_k", next_fire_at=None),
    "no id": entry(id=""),
}


def test_a_fresh_store_adopts_only_well_formed_mirror_entries(service: TimerService) -> None:
    valid = [
        entry(),
        entry(id="tm_interval", schedule="interval", interval_seconds=60),
        entry(id="tm_shortest", schedule="interval", interval_seconds=MIN_INTERVAL_SECONDS),
        entry(
            id="tm_offset",
            first_fire_at="2999-01-01T11:00:00+02:00",
            next_fire_at="2999-01-01T11:00:00+02:00",
        ),
        entry(id="tm_done", status="completed", next_fire_at=None, fire_count=1),
    ]
    path = service.runtime.settings.timer_storage_path
    assert path is not None
    path.write_text(json.dumps({"version": 1, "timers": [*MALFORMED.values(), *valid, "not an object"]}))
    assert mirror.adopt(service.runtime) == len(valid)
    adopted = {t["timer_id"]: t for t in service.list()}
    assert set(adopted) == {e["id"] for e in valid}
    assert adopted["tm_offset"]["next_fire_at"] == "2999-01-01T09:00:00.000000+00:00"
    assert adopted["tm_valid"]["fire_count"] == 0 and adopted["tm_done"]["fire_count"] == 1
    assert adopted["tm_interval"]["interval_seconds"] == 60
    assert mirror.adopt(service.runtime) == 0  # already known: nothing twice
