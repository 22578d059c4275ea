"""Cost in every model-call receipt and token/cost budgets, against the loopback model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from sqlalchemy import select

from baton.errors import BatonError
from baton.evidence.receipts import utc_now
from baton.runtime import Runtime
from baton.store.schema import receipts
from baton.subagents.runner import SpawnRequest, SubagentRunner
from baton.testing import Behavior, FakeLLMServer
from baton.timers.actions import run_action
from tests.conftest import call, stdio_session
from tests.test_subagents_runner import make_runtime

pytestmark = pytest.mark.anyio

CONTEXT = {"customer": {"tier": "gold", "orders": 12}, "request": "refund for order 1182"}


def openai_runtime(tmp_path: Path, fake_llm: FakeLLMServer, **overrides: object) -> Runtime:
    """A runtime whose provider is OpenAI's gpt-4o-mini, served by the loopback model server."""
    values: dict[str, object] = {
        "collab_provider": "openai",
        "openai_model": "gpt-4o-mini",
        "openai_api_key": "sk-test-openai-0123456789abcdef",
        "moonshot_api_key": None,
        "collab_llm_receipt_path": tmp_path / "llm_receipts.json",
        **overrides,
    }
    return make_runtime(tmp_path, fake_llm, **values)


@pytest.fixture
async def runtime(tmp_path: Path, fake_llm: FakeLLMServer) -> AsyncIterator[Runtime]:
    runtime = openai_runtime(tmp_path, fake_llm)
    yield runtime
    runtime.close()


def model_receipts(runtime: Runtime) -> list[dict[str, Any]]:
    with runtime.store.read() as connection:
        rows = connection.execute(select(receipts.c.payload).where(receipts.c.kind == "model_call")).all()
    return [json.loads(row.payload) for row in rows]


async def test_a_priced_model_is_receipted_with_its_genai_prices_cost(
    runtime: Runtime, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runner = SubagentRunner(runtime)
    try:
        spawned = await runner.spawn(
            SpawnRequest(
                task="Summarise the refund case.", context_strategy="llm_generated", parent_context=CONTEXT
            )
        )
    finally:
        await runner.aclose()
    assert spawned["success"] is True, spawned
    rows = model_receipts(runtime)
    assert [r["purpose"] for r in rows] == ["context_preparation", "subagent_turn"]
    for row in rows:
        expected = calc_price(
            Usage(input_tokens=row["usage"]["input_tokens"], output_tokens=row["usage"]["output_tokens"]),
            "gpt-4o-mini",
            provider_id="openai",
        )
        assert row["cost_usd"] == pytest.approx(float(expected.total_price))
        assert row["cost_usd"] > 0
        assert row["price_source"].startswith("genai-prices ")
        assert "cost_reason" not in row
    # the whole subagent: preparation + the turn, in usage and in cost
    status = runner.status(spawned["subagent_id"])
    assert status["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert status["usage"]["total_tokens"] == sum(r["usage"]["total_tokens"] for r in rows)
    assert spawned["cost_usd"] == status["cost_usd"]
    # the receipt file carries the same fields
    file_rows = json.loads((tmp_path / "llm_receipts.json").read_text(encoding="utf-8"))
    assert [(r["cost_usd"], r["price_source"]) for r in file_rows] == [
        (r["cost_usd"], r["price_source"]) for r in rows
    ]
    # and the server's ledger for today counts both calls
    today = runner.models.daily.spent()
    assert today.calls == 2 and today.cost_usd == pytest.approx(status["cost_usd"])


async def test_an_unknown_model_is_unpriced_with_a_reason(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    runtime = openai_runtime(
        tmp_path, fake_llm, collab_provider="openai-compatible", openai_model="house-model-7b"
    )
    runner = SubagentRunner(runtime)
    try:
        spawned = await runner.spawn(SpawnRequest(task="hello"))
    finally:
        await runner.aclose()
        runtime.close()
    [row] = model_receipts(runtime)
    assert row["cost_usd"] is None
    assert "house-model-7b" in row["cost_reason"]
    assert spawned["cost_usd"] is None and spawned["unpriced_calls"] == 1


async def test_openai_compatible_with_a_known_model_name_is_priced_by_that_name(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    runtime = openai_runtime(tmp_path, fake_llm, collab_provider="openai-compatible")
    runner = SubagentRunner(runtime)
    try:
        await runner.spawn(SpawnRequest(task="hello"))
    finally:
        await runner.aclose()
        runtime.close()
    [row] = model_receipts(runtime)
    assert row["cost_usd"] > 0
    assert "matched by model name" in row["price_source"]


async def test_a_spawn_token_budget_lets_the_crossing_call_finish_and_refuses_the_next(
    runtime: Runtime, fake_llm: FakeLLMServer
) -> None:
    runner = SubagentRunner(runtime)
    try:
        spawned = await runner.spawn(SpawnRequest(task="hello", max_total_tokens=1))
        assert spawned["success"] is True, spawned
        sent_before = len(fake_llm.requests)
        with pytest.raises(BatonError) as caught:
            await runner.send_message(spawned["subagent_id"], "and then?")
    finally:
        await runner.aclose()
    assert caught.value.error_class == "budget_exceeded"
    assert caught.value.details["budget"] == "subagent"
    assert caught.value.details["spent"]["total_tokens"] == spawned["usage"]["total_tokens"]
    assert len(fake_llm.requests) == sent_before  # refused before the model was called
    status = runner.status(spawned["subagent_id"])
    assert status["status"] == "completed" and status["turns"] == 1  # the conversation is untouched


async def test_a_preparation_that_spends_the_spawn_budget_fails_the_first_turn(
    runtime: Runtime, fake_llm: FakeLLMServer
) -> None:
    runner = SubagentRunner(runtime)
    try:
        spawned = await runner.spawn(
            SpawnRequest(
                task="hello", context_strategy="llm_generated", parent_context=CONTEXT, max_total_tokens=1
            )
        )
    finally:
        await runner.aclose()
    assert spawned["success"] is False
    assert spawned["error_class"] == "budget_exceeded"
    assert len(fake_llm.requests) == 1  # only the preparation reached the model
    assert spawned["usage"]["total_tokens"] == spawned["prep_tokens"] > 0


async def test_a_cost_budget_refuses_once_spent(runtime: Runtime, fake_llm: FakeLLMServer) -> None:
    runner = SubagentRunner(runtime)
    try:
        spawned = await runner.spawn(SpawnRequest(task="hello", max_cost_usd=1e-9))
        with pytest.raises(BatonError) as caught:
            await runner.send_message(spawned["subagent_id"], "more")
    finally:
        await runner.aclose()
    assert caught.value.error_class == "budget_exceeded"
    assert caught.value.details["spent"]["cost_usd"] > 1e-9


async def test_the_daily_budget_is_shared_by_runners_on_one_store_and_counts_timer_spawns(
    tmp_path: Path, fake_llm: FakeLLMServer, database_url: str
) -> None:
    shared = {"baton_budget_daily_tokens": 1, "baton_database_url": database_url}
    first = openai_runtime(tmp_path, fake_llm, **shared)
    second = openai_runtime(
        tmp_path, fake_llm, **shared
    )  # another replica, same store (SQLite or PostgreSQL)
    runner_a, runner_b = SubagentRunner(first), SubagentRunner(second)
    second.services["subagents"] = runner_b
    try:
        assert (await runner_a.spawn(SpawnRequest(task="hello")))["success"] is True
        sent = len(fake_llm.requests)
        with pytest.raises(BatonError) as caught:
            await runner_b.spawn(SpawnRequest(task="again"))
        fired = await run_action(second, {"kind": "spawn_subagent", "task": "from a timer", "role": "x"})
        stored = runner_b.list()
    finally:
        await runner_a.aclose()
        await runner_b.aclose()
        first.close()
        second.close()
    assert caught.value.error_class == "budget_exceeded"
    assert caught.value.details["budget"] == "daily"
    assert caught.value.details["day"] == utc_now()[:10]
    assert caught.value.details["spent"]["total_tokens"] >= 1
    assert fired.outcome == "failed" and fired.error_class == "budget_exceeded"
    assert len(fake_llm.requests) == sent
    assert len(stored) == 1  # nothing stored for the refused spawns


async def test_acceptance_over_stdio_cost_in_receipt_and_status_then_one_token_budget_refuses(
    model_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    env = {
        **model_env,
        "COLLAB_PROVIDER": "openai",
        "OPENAI_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": "sk-test-openai-0123456789abcdef",
        "BATON_BUDGET_DAILY_TOKENS": "1",
    }
    fake_llm.default = Behavior(reply="Refund approved under the gold-tier policy.")
    async with stdio_session(env) as session:
        spawned = await call(session, "mcp_spawn_subagent", {"task": "Decide the refund."})
        assert spawned["success"] is True, spawned
        status = await call(session, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]})
        refused = await call(session, "mcp_spawn_subagent", {"task": "One more."})
    [row] = json.loads(Path(env["COLLAB_LLM_RECEIPT_PATH"]).read_text(encoding="utf-8"))
    assert row["cost_usd"] > 0 and row["price_source"].startswith("genai-prices")
    assert status["cost_usd"] == pytest.approx(row["cost_usd"]) and status["cost_usd"] > 0
    assert refused["success"] is False and refused["error_class"] == "budget_exceeded"
    assert refused["spent"]["total_tokens"] == row["usage"]["total_tokens"]
    assert len(fake_llm.requests) == 1


async def test_doctor_says_when_the_daily_budget_is_spent(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    from baton.ops.service_checks import service_checks

    runtime = openai_runtime(tmp_path, fake_llm, baton_budget_daily_tokens=1)
    runner = SubagentRunner(runtime)
    try:
        before = {c.name: c for c in service_checks(runtime)}
        await runner.spawn(SpawnRequest(task="hello"))
        after = {c.name: c for c in service_checks(runtime)}
    finally:
        await runner.aclose()
        runtime.close()
    assert before["budget"].ok is True and "0 of 1 tokens" in before["budget"].detail
    assert after["budget"].ok is False and "refused" in after["budget"].detail
    assert after["traces"].ok and after["oauth"].ok


async def test_a_receipts_links_cannot_overwrite_what_the_call_measured(
    runtime: Runtime, fake_llm: FakeLLMServer
) -> None:
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from baton.models.client import ModelClient

    client = ModelClient(runtime.settings, runtime.receipts, runtime.redactor)
    forged = {"usage": {"total_tokens": 0}, "cost_usd": 0.0, "error_class": None, "spawn_receipt": {"seq": 7}}
    fake_llm.when("links-fail", Behavior(status=500))
    try:
        for text in ("links-answer", "links-fail"):
            messages = [ModelRequest(parts=[UserPromptPart(content=text)])]

            async def send(model: Any, messages: list[Any] = messages) -> Any:
                return await model_request(model, messages, model_settings=client.request_settings())

            try:
                await client.governed_call(
                    send, prompt_chars=len(text), purpose="subagent_turn", subagent_id=None, links=forged
                )
            except BatonError:
                assert text == "links-fail"
    finally:
        await client.aclose()
    answered, failed = model_receipts(runtime)
    assert answered["spawn_receipt"] == {"seq": 7} and failed["spawn_receipt"] == {"seq": 7}
    assert answered["usage"]["total_tokens"] > 0 and answered["cost_usd"] > 0
    assert failed["error_class"] == "provider_http_error"
