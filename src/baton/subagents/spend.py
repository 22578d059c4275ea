"""A subagent's own spend: the check against its budget, and how its usage and cost read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from baton import clock
from baton.errors import BudgetError
from baton.models.budgets import Limits, Spend


def check_subagent_budget(row: Any, **details: Any) -> None:
    """Refuse (``budget_exceeded``) the next model call of a subagent whose own budget is spent (what its
    subagents spent counts, as output), or whose delegation's wall time is over."""
    delegated = int(getattr(row, "delegated_tokens", 0) or 0)
    delegated_cost = float(getattr(row, "delegated_cost_usd", 0.0) or 0.0)
    spent = Spend(
        int(row.input_tokens), int(row.output_tokens) + delegated, float(row.cost_usd) + delegated_cost
    )
    Limits(row.max_total_tokens, row.max_cost_usd).check(spent, budget="subagent", **details)
    check_deadline(getattr(row, "delegation", None))


def check_deadline(delegation: Any) -> None:
    """Refuse (``budget_exceeded``, budget ``wall_time``) once the delegation's deadline has passed."""
    chain = (delegation or {}).get("chain") or []
    deadline = chain[-1].get("deadline") if chain else None
    if deadline is not None and clock.now() >= datetime.fromisoformat(deadline):
        raise BudgetError(
            "budget_exceeded",
            f"The subagent's wall time ended at {deadline} (its delegation's deadline).",
            budget="wall_time",
            deadline=deadline,
        )


def cost_so_far(row: Any) -> float | None:
    """The subagent's cost so far; None when no call of it could be priced."""
    cost = float(row.cost_usd)
    return None if row.unpriced_calls and cost == 0.0 else round(cost, 10)


def usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    """Token counts as results report them, with their total."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
