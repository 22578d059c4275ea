"""The subagent runner against the real provider code and a loopback model server (no transport)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from baton.config import Settings
from baton.errors import BatonError
from baton.runtime import Runtime
from baton.store.schema import subagent_messages, subagents
from baton.subagents.runner import SpawnRequest, SubagentRunner
from baton.testing import Behavior, FakeLLMServer
from tests.conftest import FAKE_MOONSHOT_KEY

pytestmark = pytest.mark.anyio


def make_runtime(tmp_path: Path, fake_llm: FakeLLMServer | None, **overrides: object) -> Runtime:
    values: dict[str, object] = {"baton_home": tmp_path / "home"}
    if fake_llm is not None:
        values.update(
            collab_provider="moonshot",
            openai_model="kimi-k3",
            moonshot_api_key=FAKE_MOONSHOT_KEY,
            openai_base_url=fake_llm.base_url,
        )
    values.update(overrides)
    return Runtime.open(Settings.model_validate(values))


@pytest.fixture
async def runner(tmp_path: Path, fake_llm: FakeLLMServer) -> AsyncIterator[SubagentRunner]:
    runtime = make_runtime(tmp_path, fake_llm, collab_model_timeout_seconds=1.5)
    runner = SubagentRunner(runtime)
    yield runner
    await runner.aclose()
    runtime.close()


async def test_no_provider_answers_provider_not_configured_and_stores_nothing(tmp_path: Path) -> None:
    runner = SubagentRunner(make_runtime(tmp_path, None))
    with pytest.raises(BatonError) as caught:
        await runner.spawn(SpawnRequest(task="x"))
    await runner.aclose()
    assert caught.value.error_class == "provider_not_configured"
    assert caught.value.details["missing"] == ["COLLAB_PROVIDER"]
    assert runner.list() == []


@pytest.mark.parametrize(
    ("behavior", "error_class"),
    [
        (Behavior(status=500), "provider_http_error"),
        (Behavior(status=429), "provider_http_error"),
        (Behavior(malformed=True), "provider_response_invalid"),
        (Behavior(delay_seconds=6), "provider_timeout"),
    ],
)
async def test_provider_failures_fail_the_subagent_with_a_class(
    runner: SubagentRunner, fake_llm: FakeLLMServer, behavior: Behavior, error_class: str
) -> None:
    fake_llm.default = behavior
    result = await runner.spawn(SpawnRequest(task="hello"))
    assert result["success"] is False
    assert result["error_class"] == error_class, result
    assert result["status"] == "failed"
    assert runner.status(result["subagent_id"])["error_class"] == error_class
    # the failed call is in the chain too, with its class and no usage
    (receipt,) = runner.runtime.receipts.list(kind="model_call")
    assert receipt.payload["error_class"] == error_class
    assert receipt.payload["subagent_id"] == result["subagent_id"]
    assert receipt.payload["usage"]["total_tokens"] == 0
    assert runner.runtime.receipts.verify().ok


async def test_a_provider_that_refuses_the_connection_fails_the_subagent_with_connection_failed(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    """openai's aiohttp transport reports a refused connect as a timeout; baton still says unreachable."""
    # bound and not listening: a connect to the port is refused, and no other process can take it
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        runtime = make_runtime(
            tmp_path, fake_llm, openai_base_url=f"http://127.0.0.1:{port}/v1", collab_model_timeout_seconds=60
        )
        runner = SubagentRunner(runtime)
        try:
            result = await runner.spawn(SpawnRequest(task="hello"))
            (receipt,) = runtime.receipts.list(kind="model_call")
        finally:
            await runner.aclose()
            runtime.close()
    assert result["success"] is False
    assert result["error_class"] == "provider_connection_failed", result
    assert "timed out" not in result["error"]
    assert receipt.payload["error_class"] == "provider_connection_failed"
    assert fake_llm.all_request_text() == ""


async def test_llm_generated_preparation_that_leaks_a_removed_value_fails_closed(
    runner: SubagentRunner, fake_llm: FakeLLMServer
) -> None:
    secret_looking = "sk-abcdefghijklmnop1234"
    fake_llm.when("Business rules", Behavior(reply=f"context: the customer's note was {secret_looking}"))
    with pytest.raises(BatonError) as caught:
        await runner.spawn(
            SpawnRequest(
                task="t",
                context_strategy="llm_generated",
                parent_context={"customer": "Ada", "note": secret_looking},
            )
        )
    assert caught.value.error_class == "context_privacy_violation"
    assert secret_looking not in fake_llm.all_request_text()
    assert runner.list() == []


async def test_async_subagents_run_concurrently(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    """All 20 model calls are in flight at once: the model server holds every answer until it saw 20."""
    runtime = make_runtime(tmp_path, fake_llm, collab_model_timeout_seconds=60)
    runner = SubagentRunner(runtime)
    try:
        fake_llm.hold()
        spawned = [await runner.spawn(SpawnRequest(task=f"task {n}", mode="async")) for n in range(20)]
        overlapped = await asyncio.to_thread(fake_llm.wait_for_in_flight, 20, 300)
        fake_llm.release()
        assert overlapped, f"only {fake_llm.max_in_flight} model calls were ever in flight at once"
        async with asyncio.timeout(60):
            while any(runner.status(s["subagent_id"])["status"] != "completed" for s in spawned):
                await asyncio.sleep(0.05)
        assert fake_llm.max_in_flight == 20
    finally:
        fake_llm.release()
        await runner.aclose()
        runtime.close()


async def test_full_strategy_gives_the_whole_filtered_context(runner: SubagentRunner) -> None:
    result = await runner.spawn(
        SpawnRequest(
            task="t", context_strategy="full", parent_context={"a": 1, "password": "hunter2", "b": {"c": "d"}}
        )
    )
    assert result["success"] is True
    assert '"c": "d"' in result["prepared_context"]
    assert "hunter2" not in result["prepared_context"]
    assert result["filtered_fields"] == ["password"]


async def test_messages_to_unknown_busy_or_terminal_subagents_are_refused(
    runner: SubagentRunner, fake_llm: FakeLLMServer
) -> None:
    with pytest.raises(BatonError) as unknown:
        await runner.send_message("sa_nope", "hi", parent_agent="intruder")
    assert unknown.value.error_class == "subagent_not_found"
    assert "sa_nope" not in runner._parents  # a refused caller leaves nothing behind
    fake_llm.default = Behavior(delay_seconds=5)
    spawned = await runner.spawn(SpawnRequest(task="slow", mode="async"))
    await asyncio.sleep(0)
    with pytest.raises(BatonError) as busy:
        await runner.send_message(spawned["subagent_id"], "hi", parent_agent="intruder")
    assert busy.value.error_class == "subagent_busy"
    # the subagent still acts for the agent that spawned it, not for the refused caller
    assert runner._parents[spawned["subagent_id"]] == "agent"
    runner.cancel(spawned["subagent_id"])
    with pytest.raises(BatonError) as terminal:
        await runner.send_message(spawned["subagent_id"], "hi")
    assert terminal.value.error_class == "subagent_already_terminal"
    await runner.aclose()


async def test_a_call_answered_after_its_subagent_was_cancelled_elsewhere_still_counts_in_its_usage(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    """A cancel committed by another replica while the model answers: the answer is dropped, but the call
    was receipted, so its tokens are in the subagent's totals as in the chain."""
    runtime = make_runtime(tmp_path, fake_llm, collab_model_timeout_seconds=300)
    runner = SubagentRunner(runtime)
    fake_llm.hold()
    try:
        spawned = await runner.spawn(SpawnRequest(task="hello", mode="async"))
        assert await asyncio.to_thread(fake_llm.wait_for_in_flight, 1)
        with runtime.store.write() as connection:
            ended = subagents.c.id == spawned["subagent_id"]
            connection.execute(update(subagents).where(ended).values(status="cancelled"))
    finally:
        fake_llm.release()
    while not runtime.receipts.list(kind="model_call"):
        await asyncio.sleep(0.01)
    await runner.aclose()
    (receipt,) = runtime.receipts.list(kind="model_call")
    assert receipt.payload["usage"]["total_tokens"] > 0
    status = runner.status(spawned["subagent_id"])
    assert status["status"] == "cancelled"
    assert status["result"] is None  # the late answer is not recorded
    assert status["usage"]["input_tokens"] == receipt.payload["usage"]["input_tokens"]
    assert status["usage"]["output_tokens"] == receipt.payload["usage"]["output_tokens"]
    runtime.close()


async def test_a_cancel_made_elsewhere_before_the_first_turn_stops_it_and_is_receipted_once(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    """Another process cancels an async spawn between its answer and its task's first step: no model call
    is made, and the owning process receipts the cancel (the other process leaves that to a live owner)."""
    runtime = make_runtime(tmp_path, fake_llm)
    runner = SubagentRunner(runtime)
    spawned = await runner.spawn(SpawnRequest(task="hello", mode="async"))
    subagent_id = spawned["subagent_id"]
    task = runner._tasks[subagent_id]
    assert spawned["status"] == "running" and not task.done()  # its first step has not run yet
    with runtime.store.write() as connection:
        connection.execute(update(subagents).where(subagents.c.id == subagent_id).values(status="cancelled"))
    assert await task is None
    await runner.aclose()
    assert fake_llm.requests == []
    cancels = runtime.receipts.list(kind="subagent_cancelled")
    assert [r.payload["subagent_id"] for r in cancels] == [subagent_id]
    assert runner.status(subagent_id)["status"] == "cancelled"
    runtime.close()


async def test_a_live_owner_keeps_its_subagents_and_a_dead_one_loses_them(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = Behavior(delay_seconds=5)
    first = SubagentRunner(make_runtime(tmp_path, fake_llm))
    spawned = await first.spawn(SpawnRequest(task="slow", mode="async"))
    await asyncio.sleep(0.2)
    second = SubagentRunner(make_runtime(tmp_path, fake_llm))
    assert second.recover_orphans() == 0  # the first runner's process (this one) is alive, its lease fresh
    with second.runtime.store.write() as connection:
        connection.execute(update(subagents).values(owner=f"{socket.gethostname()}:999999999:dead"))
    assert second.recover_orphans() == 1
    status = second.status(spawned["subagent_id"])
    assert status["status"] == "failed"
    assert status["error_class"] == "interrupted_by_restart"
    await first.aclose()
    await second.aclose()
    assert second.status(spawned["subagent_id"])["status"] == "failed"


async def test_a_secret_in_a_provider_error_message_is_redacted(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    runtime = make_runtime(tmp_path, fake_llm, openai_base_url=fake_llm.base_url + f"/{FAKE_MOONSHOT_KEY}")
    runner = SubagentRunner(runtime)
    fake_llm.default = Behavior(status=404)
    result = await runner.spawn(SpawnRequest(task="x"))
    await runner.aclose()
    assert result["success"] is False
    assert FAKE_MOONSHOT_KEY not in str(result)
    assert FAKE_MOONSHOT_KEY not in str([r.payload for r in runtime.receipts.list(limit=1000)])


async def test_a_server_keeps_only_its_most_recent_subagents_and_finds_an_older_ones_spawn_receipt(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton.subagents import runner as runner_module
    from baton.wire.server import build_registry

    monkeypatch.setattr(runner_module, "REMEMBERED_SUBAGENTS", 2)
    runtime = make_runtime(tmp_path, fake_llm)
    registry = build_registry(runtime)
    runner: SubagentRunner = runtime.services["subagents"]
    try:
        fake_llm.when("OLDEST", Behavior(reply="ready"))
        oldest = await runner.spawn(SpawnRequest(task="OLDEST: wait", tools=["mcp_list_timers"]))
        for index in range(3):
            await runner.spawn(SpawnRequest(task=f"plain {index}"))
        assert list(runner._spawned) == [oldest["subagent_id"]]  # none of a subagent without tools
        later = [
            (await runner.spawn(SpawnRequest(task=f"later {i}", tools=["mcp_list_timers"])))["subagent_id"]
            for i in range(2)
        ]
        # memory does not grow with every subagent: the two most recent are kept
        assert list(runner._parents) == later
        assert list(runner._spawned) == later

        turn = Behavior.calling("mcp_list_timers", {}, then="timers: {tool_results}")
        fake_llm.rules.insert(0, ("AGAIN", turn))
        answered = await runner.send_message(oldest["subagent_id"], "AGAIN: list them")
        assert answered["success"] is True, answered
        tool_calls = [
            receipt
            for receipt in runtime.receipts.list(kind="tool_call", limit=1000)
            if (receipt.payload.get("subagent") or {}).get("subagent_id") == oldest["subagent_id"]
        ]
        assert len(tool_calls) == 1
        # forgotten here, its spawn receipt is found in the chain
        assert tool_calls[0].payload["subagent"]["spawn_receipt"] == oldest["spawn_receipt"]
    finally:
        await runner.aclose()
        del registry
        runtime.close()


async def test_an_async_first_turn_sends_the_task_as_stored_redacted_and_filtered(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    """The first turn takes its conversation from the spawn, not the store: what the model is sent is
    exactly the message stored, a credential in the task redacted and a value the filter removed from
    the parent context scrubbed from it."""
    runtime = make_runtime(tmp_path, fake_llm)
    runner = SubagentRunner(runtime)
    private = "4111-1111-1111-1111"
    spawned = await runner.spawn(
        SpawnRequest(
            task=f"Refund card {private} with key sk-abcdefghijklmnopqrstu",
            mode="async",
            parent_context={"card_number": private},
        )
    )
    await runner._tasks[spawned["subagent_id"]]
    await runner.aclose()
    (request,) = fake_llm.requests
    sent = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
    with runtime.store.read() as connection:
        stored = connection.execute(
            select(subagent_messages.c.content).where(
                subagent_messages.c.subagent_id == spawned["subagent_id"], subagent_messages.c.position == 0
            )
        ).scalar_one()
    assert sent == [stored]
    assert private not in stored and "sk-abcdefghijklmnopqrstu" not in stored
    assert "[REDACTED]" in stored and "[filtered]" in stored
    runtime.close()


async def test_the_first_turn_is_given_the_row_exactly_as_the_store_holds_it(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first turn is given the row its spawn wrote instead of reading it back: every column, the JSON
    ones (filtered fields, the delegation) and the budgets included, equals what the store returns."""
    from baton.subagents import table, turns

    runtime = make_runtime(tmp_path, fake_llm)
    runner = SubagentRunner(runtime)
    given: list[tuple[Any, Any]] = []
    first_turn = turns.first_turn

    def capturing(runtime: Runtime, subagent_id: str, stored: Any, task: str) -> Any:
        with runtime.store.read_prepared() as connection:
            read, _conversation = table.load(connection, subagent_id)
        given.append((stored, read))
        return first_turn(runtime, subagent_id, stored, task)

    monkeypatch.setattr(turns, "first_turn", capturing)
    spawned = await runner.spawn(
        SpawnRequest(
            task="hello",
            mode="async",
            parent_context={"order": 7, "api_token": "hidden-value"},
            context_strategy="full",
            max_total_tokens=5000,
            max_cost_usd=1,
            max_seconds=600,
        )
    )
    assert await runner._tasks[spawned["subagent_id"]] is not None
    await runner.aclose()
    ((stored, read),) = given
    assert stored._asdict() == read._asdict()
    assert stored.delegation["chain"][-1]["principal"] == spawned["subagent_id"]
    assert stored.filtered_fields == ["api_token"]
    runtime.close()
