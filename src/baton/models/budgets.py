"""Token and cost budgets: per spawn (``max_total_tokens``, ``max_cost_usd``) and per server per UTC day.

The daily spend lives in one ``model_spend`` row per UTC day, updated in the same transaction as the
``model_call`` receipt, so every replica on one store shares it and a budget check reads one row by its
primary key (summing receipts would parse every payload of the day on every call).

Before each model call, its estimated tokens and cost (the prompt's size plus the output length learned
from the model's recent answers, the ``COLLAB_MAX_TOKENS`` cap its ceiling: :mod:`baton.models.estimates`)
are *reserved* on the day's row by one conditional ``UPDATE`` that only succeeds when the estimate fits:
what was spent, plus what calls in flight reserved, plus this estimate, is within the limit (or the day
holds nothing yet, so a call larger than the whole day still runs, alone); otherwise the call is refused
with ``budget_exceeded`` before the model sees it. The call's receipt settles the reservation (the actual
spend replaces it, in the same transaction); a failed or cancelled call releases it. The update is
atomic on SQLite and PostgreSQL alike, so concurrent calls (any replica) cannot all pass a check and then
all spend: reservations never pass the limit but for that one lone call, and the day overshoots its
limit by at most one call's estimate (plus what an answer spends past its estimate: the estimate is a
high percentile of recent answers, so that is rare and bounded by the cap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Update, and_, bindparam, insert, or_, select, true, update
from sqlalchemy.exc import IntegrityError

from baton import clock
from baton.config import Settings
from baton.errors import BudgetError
from baton.store.engine import DriverTransaction, Store
from baton.store.prepared import Prepared
from baton.store.schema import model_spend

#: Dollars held by a day below which it holds nothing (sums of floats given back rarely reach 0.0 exactly).
IDLE_USD = 1e-9


@dataclass(frozen=True)
class Spend:
    """Tokens and dollars spent (``cost_usd`` counts priced calls only)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, Any]:
        """The spend as a result or receipt field."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 10),
            "calls": self.calls,
            "unpriced_calls": self.unpriced_calls,
        }


@dataclass(frozen=True)
class Limits:
    """A token and a dollar limit; None means unlimited."""

    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def check(self, spent: Spend, *, budget: str, **details: Any) -> None:
        """Raise ``budget_exceeded`` when ``spent`` has reached either limit."""
        reached = []
        if self.max_total_tokens is not None and spent.total_tokens >= self.max_total_tokens:
            reached.append(f"{spent.total_tokens} of {self.max_total_tokens} tokens")
        if self.max_cost_usd is not None and spent.cost_usd >= self.max_cost_usd:
            reached.append(f"${spent.cost_usd:.6f} of ${self.max_cost_usd:.6f}")
        if reached:
            raise BudgetError(
                "budget_exceeded",
                f"The {budget} budget is spent ({'; '.join(reached)}); the model was not called.",
                budget=budget,
                spent=spent.as_dict(),
                limit={"max_total_tokens": self.max_total_tokens, "max_cost_usd": self.max_cost_usd},
                **details,
            )


@dataclass(frozen=True)
class Reservation:
    """What one model call holds of a day's budget until its receipt settles it."""

    day: str
    tokens: int
    cost_usd: float


def estimate_tokens(prompt_chars: int, max_output_tokens: int) -> int:
    """A generous estimate of one call's tokens: a token per three prompt characters, plus the output cap."""
    return prompt_chars // 3 + 16 + max_output_tokens


def utc_day(now: datetime | None = None) -> str:
    """The UTC day a spend counts in, ``YYYY-MM-DD``."""
    return (now or clock.now()).astimezone(UTC).strftime("%Y-%m-%d")


class DailyBudget:
    """The server's daily budget (``BATON_BUDGET_DAILY_TOKENS`` / ``BATON_BUDGET_DAILY_USD``) and its ledger.

    Its statements are built once (:mod:`baton.store.prepared`): the reservation's condition depends only on
    which limits are set, which is fixed for the process.
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.limits = Limits(settings.baton_budget_daily_tokens, settings.baton_budget_daily_usd)
        self._ensured_day: str | None = None
        self._reserve = Prepared(_reservation(self.limits))

    @property
    def enabled(self) -> bool:
        """Whether either daily limit is set."""
        return self.limits.max_total_tokens is not None or self.limits.max_cost_usd is not None

    def spent(self, day: str | None = None) -> Spend:
        """What was spent on ``day`` (default: today, UTC), by every replica."""
        day = day or utc_day()
        with self.store.read_prepared() as connection:
            row = _SELECT_DAY.first(connection, on_day=day)
        if row is None:
            return Spend()
        return Spend(
            int(row.input_tokens),
            int(row.output_tokens),
            float(row.cost_usd),
            int(row.calls),
            int(row.unpriced_calls),
        )

    def check(self) -> None:
        """Refuse (``budget_exceeded``) when today's spend has reached a daily limit."""
        if self.enabled:
            day = utc_day()
            self.limits.check(self.spent(day), budget="daily", day=day)

    def reserve(self, tokens: int, cost_usd: float) -> Reservation:
        """Reserve one call's estimate on today's row, or refuse it (``budget_exceeded``) when no room is left.

        It is the call's only budget transaction: a day whose spend has reached a limit has no room either
        (what is reserved is never negative), and is then refused as :meth:`check` refuses it.
        """
        day = self.prepare()
        reservation = Reservation(day, tokens, cost_usd)
        if not self.enabled:
            return reservation
        with self.store.write_prepared() as connection:
            changed = self._reserve.rowcount(connection, on_day=day, add_tokens=tokens, add_usd=cost_usd)
        if not changed:
            spent = self.spent(day)
            self.limits.check(spent, budget="daily", day=day)
            raise BudgetError(
                "budget_exceeded",
                f"The daily budget has no room for this model call (about {tokens} tokens): what was spent "
                f"({spent.total_tokens} tokens, ${spent.cost_usd:.6f}) and what calls in flight reserved "
                "leave less than its estimate; the model was not called.",
                budget="daily",
                day=day,
                spent=spent.as_dict(),
                estimate={"total_tokens": tokens, "cost_usd": round(cost_usd, 10)},
                limit={
                    "max_total_tokens": self.limits.max_total_tokens,
                    "max_cost_usd": self.limits.max_cost_usd,
                },
            )
        return reservation

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back in its own transaction (the call failed or was cancelled)."""
        if not self.enabled:
            return
        with self.store.write_prepared() as connection:
            _RELEASE.rowcount(connection, **_held(reservation))

    def prepare(self) -> str:
        """Make sure today's ledger row exists (its own transaction, so a race between replicas is harmless)."""
        day = utc_day()
        if self._ensured_day == day:
            return day
        with self.store.read() as connection:
            exists = connection.execute(select(model_spend.c.day).where(model_spend.c.day == day)).first()
        if exists is None:
            try:
                with self.store.write() as connection:
                    connection.execute(
                        insert(model_spend).values(
                            day=day,
                            calls=0,
                            input_tokens=0,
                            output_tokens=0,
                            cost_usd=0.0,
                            unpriced_calls=0,
                            reserved_tokens=0,
                            reserved_usd=0.0,
                        )
                    )
            except IntegrityError:
                pass  # another process created it first
        self._ensured_day = day
        return day

    def settle_in(
        self,
        connection: Connection | DriverTransaction,
        reservation: Reservation,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
    ) -> None:
        """Add one call to its day's ledger and give its reservation back, in one statement inside the
        caller's transaction (the call's receipt)."""
        spend = {
            "on_day": reservation.day,
            "add_input_tokens": input_tokens,
            "add_output_tokens": output_tokens,
            "add_cost_usd": cost_usd or 0.0,
            "add_unpriced_calls": 1 if cost_usd is None else 0,
        }
        if self.enabled:
            _RECORD_AND_RELEASE.rowcount(
                connection, **spend, held_tokens=reservation.tokens, held_usd=reservation.cost_usd
            )
        else:
            _RECORD.rowcount(connection, **spend)


_spend = model_spend.c
#: Parameter names differ from column names (SQLAlchemy reserves those in an INSERT or UPDATE).
_ON_DAY = _spend.day == bindparam("on_day")
_SELECT_DAY = Prepared(select(model_spend).where(_ON_DAY))
#: One call added to the day's totals.
_RECORDED: dict[str, Any] = {
    "calls": _spend.calls + 1,
    "input_tokens": _spend.input_tokens + bindparam("add_input_tokens"),
    "output_tokens": _spend.output_tokens + bindparam("add_output_tokens"),
    "cost_usd": _spend.cost_usd + bindparam("add_cost_usd"),
    "unpriced_calls": _spend.unpriced_calls + bindparam("add_unpriced_calls"),
}
#: One reservation given back.
_RELEASED: dict[str, Any] = {
    "reserved_tokens": _spend.reserved_tokens - bindparam("held_tokens"),
    "reserved_usd": _spend.reserved_usd - bindparam("held_usd"),
}
_RECORD = Prepared(update(model_spend).where(_ON_DAY).values(_RECORDED))
_RELEASE = Prepared(update(model_spend).where(_ON_DAY).values(_RELEASED))
_RECORD_AND_RELEASE = Prepared(update(model_spend).where(_ON_DAY).values({**_RECORDED, **_RELEASED}))


def _held(reservation: Reservation) -> dict[str, Any]:
    """The parameters that give ``reservation`` back."""
    return {"on_day": reservation.day, "held_tokens": reservation.tokens, "held_usd": reservation.cost_usd}


def _reservation(limits: Limits) -> Update:
    """The conditional ``UPDATE`` that reserves a call's estimate only where it fits under ``limits``:
    what was spent, plus what calls in flight reserved, plus this estimate, is within each limit set; or
    the day holds nothing yet (one call larger than the whole day still runs, alone)."""
    fits: list[ColumnElement[bool]] = [_ON_DAY]
    if limits.max_total_tokens is not None:
        held = _spend.input_tokens + _spend.output_tokens + _spend.reserved_tokens
        fits.append(or_(held + bindparam("add_tokens") <= limits.max_total_tokens, held == 0))
    if limits.max_cost_usd is not None:
        held_usd = _spend.cost_usd + _spend.reserved_usd
        fits.append(or_(held_usd + bindparam("add_usd") <= limits.max_cost_usd, held_usd <= IDLE_USD))
    return (
        update(model_spend)
        .where(and_(true(), *fits))
        .values(
            reserved_tokens=_spend.reserved_tokens + bindparam("add_tokens"),
            reserved_usd=_spend.reserved_usd + bindparam("add_usd"),
        )
    )
