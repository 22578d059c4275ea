"""Bounds of subagents: the daily budget is reserved before each model call; concurrent subagents are capped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from baton.errors import SubagentError
from baton.models.budgets import estimate_tokens
from baton.models.client import ModelClient
from baton.runtime import Runtime
from baton.store.schema import model_spend, receipts
from baton.subagents.context import subagent_system_prompt
from baton.subagents.runner import SpawnRequest, SubagentRunner
from baton.testing import Behavior, FakeLLMServer
from tests.test_subagents_runner import make_runtime

pytestmark = pytest.mark.anyio

SPAWNS = 40
DAILY_TOKENS = 50


def statuses(runners: list[SubagentRunner]) -> list[dict[str, Any]]:
    """Every subagent's status (the runners share one store)."""
    return [runners[0].status(row["subagent_id"]) for row in runners[0].list(limit=1000)]


def model_calls(runtime: Runtime) -> int:
    with runtime.store.read() as connection:
        return len(connection.execute(select(receipts.c.seq).where(receipts.c.kind == "model_call")).all())


async def test_forty_concurrent_spawns_overshoot_a_fifty_token_day_by_at_most_one_calls_estimate(
    tmp_path: Path, fake_llm: FakeLLMServer, database_url: str
) -> None:
    shared = {"baton_budget_daily_tokens": DAILY_TOKENS, "baton_database_url": database_url}
    replicas = [make_runtime(tmp_path, fake_llm, collab_max_tokens=8, **shared) for _ in range(2)]
    runners = [SubagentRunner(runtime) for runtime in replicas]
    fake_llm.default = Behavior(reply="a short answer")
    fake_llm.hold()  # every admitted call stays in flight until all 40 have tried
    try:
        spawned = await asyncio.gather(
            *(runners[i % 2].spawn(SpawnRequest(task=f"job number {i}", mode="async")) for i in range(SPAWNS))
        )
        with anyio.fail_after(120):
            while sum(1 for s in statuses(runners) if s["status"] == "failed") + fake_llm.in_flight < SPAWNS:
                await anyio.sleep(0.02)
        admitted = fake_llm.in_flight
        fake_llm.release()
        with anyio.fail_after(120):
            while any(s["status"] in ("queued", "running") for s in statuses(runners)):
                await anyio.sleep(0.02)
        final = statuses(runners)
        with replicas[0].store.read() as connection:
            day = connection.execute(select(model_spend)).one()
        calls = model_calls(replicas[0])
    finally:
        fake_llm.release()
        for runner in runners:
            await runner.aclose()
        for runtime in replicas:
            runtime.close()

    assert all(s["success"] for s in spawned)  # async spawns are stored; their first call is refused
    refused = [s for s in final if s["status"] == "failed"]
    assert {s["error_class"] for s in refused} == {"budget_exceeded"}
    completed = [s for s in final if s["status"] == "completed"]
    assert len(completed) == admitted == calls == len(fake_llm.requests) >= 1
    longest = max(
        len(subagent_system_prompt("assistant", "")) + len(f"job number {i}") for i in range(SPAWNS)
    )
    one_estimate = estimate_tokens(longest, 8)
    assert one_estimate < 100  # without the reservation, 40 calls spend several hundred tokens
    assert day.input_tokens + day.output_tokens <= DAILY_TOKENS + one_estimate
    assert day.reserved_tokens == 0  # every reservation was settled or released


async def test_past_the_concurrency_limit_a_spawn_is_refused_and_nothing_is_stored(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    runtime = make_runtime(tmp_path, fake_llm, baton_subagent_max_concurrent=2)
    runner = SubagentRunner(runtime)
    fake_llm.hold()
    try:
        first = [await runner.spawn(SpawnRequest(task=f"long job {i}", mode="async")) for i in range(2)]
        with pytest.raises(SubagentError) as caught:
            await runner.spawn(SpawnRequest(task="one too many", mode="async"))
        stored_while_full = len(runner.list())
        fake_llm.release()
        with anyio.fail_after(300):
            while any(runner.status(s["subagent_id"])["status"] != "completed" for s in first):
                await anyio.sleep(0.02)
        again = await runner.spawn(SpawnRequest(task="now there is room"))
    finally:
        fake_llm.release()
        await runner.aclose()
        runtime.close()
    assert caught.value.error_class == "subagent_concurrency_exceeded"
    assert caught.value.details == {"active": 2, "limit": 2}
    assert stored_while_full == 2
    assert again["success"] is True and again["status"] == "completed"


async def test_a_thousand_token_day_admits_every_concurrent_spawn_whose_learned_estimate_fits(
    tmp_path: Path, fake_llm: FakeLLMServer, database_url: str
) -> None:
    """The issue's day: 1,000 tokens under the 2,048-token output cap. Reserving the cap let one call in
    at a time; the estimate learned from the model's answers lets in every spawn that fits."""
    runtime = make_runtime(
        tmp_path, fake_llm, baton_budget_daily_tokens=1000, baton_database_url=database_url
    )
    runner = SubagentRunner(runtime)
    fake_llm.default = Behavior(reply="a short answer")
    try:
        for i in range(3):  # the model's recent answers
            assert (await runner.spawn(SpawnRequest(task=f"warm up {i}")))["status"] == "completed"
        output = runner.models.outputs().tokens()
        # a restarted process learns the same from the chain's model_call receipts
        restarted = ModelClient(runtime.settings, runtime.receipts, runtime.redactor).outputs().tokens()
        with runtime.store.read() as connection:
            before = connection.execute(select(model_spend)).one()
        fake_llm.hold()
        await asyncio.gather(
            *(runner.spawn(SpawnRequest(task=f"job number {i}", mode="async")) for i in range(SPAWNS))
        )
        with anyio.fail_after(120):
            while sum(1 for s in statuses([runner]) if s["status"] == "failed") + fake_llm.in_flight < SPAWNS:
                await anyio.sleep(0.02)
        admitted = fake_llm.in_flight
        fake_llm.release()
        with anyio.fail_after(120):
            while any(s["status"] in ("queued", "running") for s in statuses([runner])):
                await anyio.sleep(0.02)
        final = statuses([runner])
        with runtime.store.read() as connection:
            day = connection.execute(select(model_spend)).one()
    finally:
        fake_llm.release()
        await runner.aclose()
        runtime.close()

    assert output == restarted == 3  # "a short answer": learned from the answers, not the 2,048 cap
    longest = max(
        len(subagent_system_prompt("assistant", "")) + len(f"job number {i}") for i in range(SPAWNS)
    )
    one_estimate = estimate_tokens(longest, output)
    room = 1000 - (before.input_tokens + before.output_tokens)
    assert admitted >= room // one_estimate > 7  # every spawn that fits ran (the cap let in one at a time)
    refused = [s for s in final if s["status"] == "failed"]
    assert len(refused) == SPAWNS - admitted and {s["error_class"] for s in refused} == {"budget_exceeded"}
    assert day.input_tokens + day.output_tokens <= 1000 + one_estimate
    assert day.reserved_tokens == 0
