"""The daily ledger's one transaction per step: the reservation also refuses a spent day, and a call's
receipt records its spend and gives its reservation back in one statement."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from baton.config import Settings
from baton.errors import BudgetError
from baton.models.budgets import DailyBudget, Limits, Spend, estimate_tokens, utc_day
from baton.models.estimates import FIRST_OUTPUT_ESTIMATE, RECENT_OUTPUTS, OutputEstimate
from baton.store.engine import Store
from baton.store.schema import model_spend


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
    assert refused.value.message == (
        "The daily budget has no room for this model call (about 5 tokens): what was spent (0 tokens, "
        "$0.000000) and what calls in flight reserved leave less than its estimate; the model was not called."
    )
    assert refused.value.details == {
        "budget": "daily",
        "day": utc_day(),
        "spent": Spend().as_dict(),
        "estimate": {"total_tokens": 5, "cost_usd": 0.0},
        "limit": {"max_total_tokens": 10, "max_cost_usd": None},
    }
    assert day_row(store)[4] == 10


def test_dollars_held_by_calls_in_flight_count_toward_the_dollar_limit(store: Store, tmp_path: Path) -> None:
    """Reserved dollars are added to what was spent: with $1.00 held under a $1 limit, no room is left."""
    daily = budget(store, tmp_path, baton_budget_daily_usd=1.0)
    daily.reserve(1, 0.5)
    daily.reserve(1, 0.5)  # $0.50 held is still below the limit: the call may go
    with pytest.raises(BudgetError) as refused:
        daily.reserve(1, 0.60000000001)
    assert refused.value.details["estimate"] == {"total_tokens": 1, "cost_usd": 0.6}  # to ten places
    assert refused.value.details["limit"] == {"max_total_tokens": None, "max_cost_usd": 1.0}
    assert day_row(store)[5] == pytest.approx(1.0)


def test_a_dollar_limit_alone_refuses_once_its_dollars_are_spent(store: Store, tmp_path: Path) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_usd=0.5)
    held = daily.reserve(1, 0.5)
    with store.write_prepared() as transaction:
        daily.settle_in(transaction, held, 1, 1, 0.5)
    with pytest.raises(BudgetError) as spent:
        daily.check()
    assert "$0.500000 of $0.500000" in spent.value.message


def test_a_limit_reached_exactly_is_spent_and_every_limit_reached_is_named() -> None:
    limits = Limits(max_total_tokens=10, max_cost_usd=0.5)
    limits.check(Spend(input_tokens=6, output_tokens=3, cost_usd=0.49), budget="spawn")  # below both
    at_both = Spend(input_tokens=6, output_tokens=4, cost_usd=0.5, calls=2)
    with pytest.raises(BudgetError) as refused:
        limits.check(at_both, budget="spawn", subagent_id="sa_1")
    assert refused.value.message == (
        "The spawn budget is spent (10 of 10 tokens; $0.500000 of $0.500000); the model was not called."
    )
    assert refused.value.details == {
        "budget": "spawn",
        "spent": at_both.as_dict(),
        "limit": {"max_total_tokens": 10, "max_cost_usd": 0.5},
        "subagent_id": "sa_1",
    }


def test_the_estimate_is_a_token_per_three_characters_plus_sixteen_plus_the_output_cap() -> None:
    assert estimate_tokens(30, 100) == 126
    assert estimate_tokens(32, 100) == 126  # whole tokens
    assert estimate_tokens(0, 0) == 16


def test_the_day_is_the_utc_day_whatever_the_hosts_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 20:00 UTC it is already tomorrow in Kathmandu (UTC+5:45): the spend still counts today, in UTC."""
    import time
    from datetime import UTC, datetime, timedelta, timezone

    monkeypatch.setenv("TZ", "NPT-5:45")  # POSIX: 5:45 east of UTC, no tzdata needed
    time.tzset()
    try:
        assert utc_day(datetime(2026, 12, 4, 20, 0, tzinfo=UTC)) == "2026-12-04"
        assert utc_day(datetime(2026, 12, 5, 1, 45, tzinfo=timezone(timedelta(hours=5, minutes=45)))) == (
            "2026-12-04"
        )
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_spend_is_shown_to_ten_decimal_places_of_a_dollar() -> None:
    assert Spend(cost_usd=0.12345678901234).as_dict()["cost_usd"] == 0.123456789


def test_a_call_is_refused_when_its_estimate_does_not_fit_and_admitted_when_it_does(
    store: Store, tmp_path: Path
) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_tokens=100)
    daily.reserve(60, 0.0)
    with pytest.raises(BudgetError):
        daily.reserve(50, 0.0)  # 110 of 100: it does not fit, though 40 tokens remain
    daily.reserve(40, 0.0)  # exactly fits
    assert day_row(store)[4] == 100


def test_an_empty_day_admits_one_call_larger_than_the_whole_day_and_nothing_beside_it(
    store: Store, tmp_path: Path
) -> None:
    daily = budget(store, tmp_path, baton_budget_daily_tokens=50)
    held = daily.reserve(80, 0.0)
    with pytest.raises(BudgetError):
        daily.reserve(1, 0.0)
    daily.release(held)
    daily.reserve(80, 0.0)  # alone again


def test_the_output_estimate_starts_modest_learns_a_high_percentile_and_never_passes_the_cap() -> None:
    assert OutputEstimate(2048).tokens() == FIRST_OUTPUT_ESTIMATE
    assert OutputEstimate(100).tokens() == 100
    learned = OutputEstimate(2048)
    for tokens in [10] * 19 + [500]:
        learned.record(tokens)
    assert learned.tokens() == 10  # the 95th percentile of twenty answers: one long answer is an outlier
    learned.record(600)
    assert learned.tokens() == 500
    for _ in range(RECENT_OUTPUTS):
        learned.record(5000)
    assert learned.tokens() == 2048


def test_the_output_estimate_is_seeded_once_from_history_before_what_it_learns_itself() -> None:
    seeded: list[int] = []

    def history() -> list[int]:
        seeded.append(1)
        return [40] * 30

    estimate = OutputEstimate(2048, history)
    estimate.record(7)
    assert estimate.tokens() == 40 and estimate.tokens() == 40
    assert seeded == [1]
