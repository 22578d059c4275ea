"""The daily ledger's one transaction per step: the reservation also refuses a spent day, and a call's
receipt records its spend and gives its reservation back in one statement."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from baton.budgets import DailyBudget, utc_day
from baton.config import Settings
from baton.errors import BudgetError
from baton.schema import model_spend
from baton.store import Store


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store(database_url)
    yield opened
    opened.dispose()


def budget(store: Store, tmp_path: Path, **limits: object) -> DailyBudget:
    settings = Settings.model_validate({"baton_home": tmp_path / "home", **limits})
    return DailyBudget(store, settings)


def day_row(store: Store) -> tuple[int, int, int, int, int, float]:
    with store.read() as connection:
        row = connection.execute(select(model_spend).where(model_spend.c.day == utc_day())).one()
    return (
        row.calls,
        row.input_tokens,
        row.output_tokens,
        row.unpriced_calls,
        row.reserved_tokens,
        row.reserved_usd,
    )


def test_a_settled_call_is_counted_and_its_reservation_given_back(store: Store, tmp_path: Path) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_tokens=1000, baton_budget_daily_usd=5.0)
    first = daily.reserve(40, 0.5)
    second = daily.reserve(60, 0.25)
    assert day_row(store) == (0, 0, 0, 0, 100, 0.75)
    with store.write_prepared() as transaction:
        daily.settle_in(transaction, first, 7, 3, None)
    assert day_row(store) == (1, 7, 3, 1, 60, 0.25)
    daily.release(second)
    assert day_row(store) == (1, 7, 3, 1, 0, 0.0)
    assert daily.spent().as_dict() == {
        "input_tokens": 7,
        "output_tokens": 3,
        "total_tokens": 10,
        "cost_usd": 0.0,
        "calls": 1,
        "unpriced_calls": 1,
    }


def test_without_limits_calls_are_still_counted_and_nothing_is_reserved(store: Store, tmp_path: Path) -> None:
    daily = budget(store, tmp_path)
    held = daily.reserve(40, 0.0)
    with store.write_prepared() as transaction:
        daily.settle_in(transaction, held, 5, 6, 0.001)
    calls, input_tokens, output_tokens, unpriced, reserved, _usd = day_row(store)
    assert (calls, input_tokens, output_tokens, unpriced, reserved) == (1, 5, 6, 0, 0)


def test_the_reservation_refuses_a_spent_day_as_the_check_does(store: Store, tmp_path: Path) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_tokens=10)
    held = daily.reserve(5, 0.0)
    with store.write_prepared() as transaction:
        daily.settle_in(transaction, held, 8, 4, None)
    with pytest.raises(BudgetError) as checked:
        daily.check()
    with pytest.raises(BudgetError) as reserved:
        daily.reserve(5, 0.0)
    assert reserved.value.message == checked.value.message
    assert "is spent" in reserved.value.message
    assert reserved.value.details == checked.value.details
    assert day_row(store)[4] == 0  # nothing was held by the refused call


def test_a_day_held_by_calls_in_flight_has_no_room(store: Store, tmp_path: Path) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_tokens=10)
    daily.reserve(10, 0.0)
    daily.check()  # nothing is spent yet
    with pytest.raises(BudgetError) as refused:
        daily.reserve(5, 0.0)
    assert refused.value.error_class == "budget_exceeded"
    assert "no room" in refused.value.message
    assert refused.value.details["estimate"] == {"total_tokens": 5, "cost_usd": 0.0}
    assert day_row(store)[4] == 10
