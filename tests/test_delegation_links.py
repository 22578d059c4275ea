"""A delegation link is a subset of the one before it, field by field; and a subagent's wall time holds.

The subset rule is the one the spawn builds links by and the verifier checks exported chains with
(:mod:`baton.delegation`); the wall time is checked against the process's clock, which the test drives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from baton.delegation import DELEGATION_WIDENS, Ledger, chain_problem, link_sha256, make_link
from baton.errors import BatonError
from baton.subagents.runner import SpawnRequest, SubagentRunner
from baton.testing import FakeLLMServer
from baton.testing.clock import ManualClock
from tests.test_subagents_runner import make_runtime

PARENT = {
    "tools": ["books__echo", "books__read", "mcp_spawn_subagent"],
    "adapters": ["books"],
    "read_only": True,
    "predicates": ["a" * 64],
    "max_total_tokens": 1000,
    "max_cost_usd": 0.5,
    "deadline": "2026-12-06T10:00:00+00:00",
}
CHILD = {**PARENT, "tools": ["books__echo"], "max_total_tokens": 400, "predicates": ["a" * 64, "b" * 64]}


def chain_with(**child: Any) -> list[dict[str, Any]]:
    """agent -> parent -> a child with ``child`` over :data:`CHILD`, every link hashed and linked."""
    root = make_link(None, principal="lead")
    parent = make_link(root, principal="sa_parent", **PARENT)
    return [root, parent, make_link(parent, principal="sa_child", **{**CHILD, **child})]


def test_a_narrower_child_holds() -> None:
    assert chain_problem(chain_with()) is None
    assert chain_problem(chain_with(deadline="2026-12-06T09:00:00+00:00", max_cost_usd=0.1)) is None


@pytest.mark.parametrize(
    ("wider", "reason"),
    [
        ({"tools": ["books__echo", "books__write"]}, "its tools are not a subset"),
        ({"adapters": ["books", "mail"]}, "its adapters are not a subset"),
        ({"read_only": False}, "it drops its parent's read_only"),
        ({"predicates": ["b" * 64]}, "it drops an argument predicate"),
        ({"max_total_tokens": 1001}, "its max_total_tokens is looser"),
        ({"max_total_tokens": None}, "its max_total_tokens is looser"),
        ({"max_cost_usd": 0.6}, "its max_cost_usd is looser"),
        ({"deadline": "2026-12-06T10:00:01+00:00"}, "its deadline is looser"),
        ({"deadline": None}, "its deadline is looser"),
    ],
)
def test_a_child_that_holds_more_than_its_parent_widens(wider: dict[str, Any], reason: str) -> None:
    problem = chain_problem(chain_with(**wider))
    assert problem is not None and "delegation link 2 (sa_child) widens" in problem and reason in problem


def test_a_link_edited_without_its_hash_or_relinked_does_not_hold() -> None:
    edited = chain_with()
    edited[2]["max_total_tokens"] = 10  # narrower, but no longer what was hashed
    assert chain_problem(edited) == "delegation link 2 does not match its sha256"
    relinked = chain_with()
    relinked[2]["prev_sha256"] = relinked[0]["sha256"]
    relinked[2]["sha256"] = link_sha256(relinked[2])
    assert chain_problem(relinked) == "delegation link 2 does not link to the one before it"


def test_a_later_receipt_must_carry_the_link_its_subagent_was_spawned_with() -> None:
    ledger = Ledger()
    spawned = chain_with()
    assert ledger.check("subagent_spawned", {"delegation": spawned}) is None
    assert ledger.check("model_call", {"delegation": spawned}) is None
    swapped = chain_with(max_total_tokens=300)  # narrower than its parent, but not what was spawned
    problem = ledger.check("gateway_call", {"subagent": {"delegation": swapped}})
    assert problem == "the delegation link of sa_child is not the one it was spawned with"
    assert DELEGATION_WIDENS == "receipt_delegation_widens"


@pytest.mark.anyio
async def test_a_subagent_past_its_wall_time_makes_no_more_model_calls(
    tmp_path: Path, fake_llm: FakeLLMServer, manual_clock: ManualClock
) -> None:
    runner = SubagentRunner(make_runtime(tmp_path, fake_llm))
    try:
        first = await runner.spawn(SpawnRequest(task="WALL-TIME: hello", max_seconds=60))
        assert first["status"] == "completed", first
        calls = len(fake_llm.requests)
        manual_clock.advance(61)
        with pytest.raises(BatonError) as refused:
            await runner.send_message(first["subagent_id"], "and again")
        assert refused.value.error_class == "budget_exceeded"
        assert refused.value.details["budget"] == "wall_time"
        assert len(fake_llm.requests) == calls  # the model was not asked again
    finally:
        await runner.aclose()
        runner.runtime.close()
