"""Governed subagents through ``python -m baton serve``: a subagent's tools, by allow-list, on the agent's path.

A real locked, replayed and promoted upstream (the stdlib test MCP server, sandboxed) and the loopback
model, which answers with OpenAI tool calls from a script, drive real tool loops offline.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from baton.config import load_settings
from baton.runtime import Runtime
from baton.store.schema import receipts
from baton.testing import Behavior, FakeLLMServer, ToolCall
from baton.testing.gateway_adapter import document, make_live, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import call, stdio_session, subagent_environ

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

CANARY = "PRIVATE-MARKER-MUST-BE-FILTERED"
RECORD = {"customer": "ACME Corp", "open_invoices": 3, "private_notes": CANARY}
TOOLS = [
    tool("echo", text="string"),
    tool("transfer", to="string", amount="integer"),
    tool("lookup", customer="string"),
    tool("calls"),
    tool("delete_everything"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A BATON_HOME with the ``demo`` adapter live: echo, lookup, calls; transfer needs an approval."""
    path = tmp_path_factory.mktemp("governed") / "home"
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(path), "BATON_NPM_REGISTRY": registry.url}))
        try:
            draft = document(
                "demo", publish(registry), TOOLS, env={"BATON_TEST_MCP_RECORD": json.dumps(RECORD)}
            )
            make_live(
                runtime,
                draft,
                allowed=["echo", "transfer", "lookup", "calls"],
                approval_required=["transfer"],
                approval_timeout_seconds=600,
            )
        finally:
            runtime.close()
    return str(path)


@pytest.fixture(scope="module")
def env(home: str, llm: FakeLLMServer) -> dict[str, str]:
    return subagent_environ(
        home,
        llm.base_url,
        BATON_HITL_ALLOW_MCP_DECISIONS="1",  # the tests play the operator through MCP
        BATON_SUBAGENT_APPROVAL_WAIT_SECONDS="0",  # a sync spawn returns as soon as its subagent waits
        HITL_TIMEOUT_SECONDS="600",
    )


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


def chain(home: str) -> list[dict[str, Any]]:
    """Every receipt of the store, in order, with its payload parsed."""
    runtime = Runtime.open(load_settings({"BATON_HOME": home}))
    try:
        with runtime.store.read() as connection:
            rows = connection.execute(select(receipts).order_by(receipts.c.seq)).all()
    finally:
        runtime.close()
    return [
        {"seq": r.seq, "kind": r.kind, "sha256": r.sha256, "payload": json.loads(r.payload)} for r in rows
    ]


def of_subagent(rows: list[dict[str, Any]], subagent_id: str) -> list[dict[str, Any]]:
    """The receipts that name the subagent (its spawn, model calls, tool calls, end)."""
    return [
        r
        for r in rows
        if r["payload"].get("subagent_id") == subagent_id
        or (r["payload"].get("subagent") or {}).get("subagent_id") == subagent_id
    ]


async def upstream_calls(session: Any) -> dict[str, int]:
    """How often the sandboxed upstream ran each tool (asked by the agent itself, through the proxy)."""
    result = await call(session, "demo__calls")
    counts: dict[str, int] = json.loads(result["text"])
    return counts


async def settled(session: Any, subagent_id: str) -> dict[str, Any]:
    """The subagent's status once it is neither queued nor running."""
    with anyio.fail_after(120):
        while (status := await call(session, "mcp_get_subagent_status", {"subagent_id": subagent_id}))[
            "status"
        ] in ("queued", "running"):
            await anyio.sleep(0.05)
    return status


async def pending_request(session: Any, subagent_id: str) -> dict[str, Any]:
    """The human request a tool call of the subagent waits on."""
    with anyio.fail_after(300):
        while True:
            for request in (await call(session, "mcp_list_pending_requests"))["requests"]:
                if (request.get("context") or {}).get("subagent_id") == subagent_id:
                    return dict(request)
            await anyio.sleep(0.05)


async def test_a_tool_the_agent_cannot_give_is_refused_at_spawn_naming_it(session: Any) -> None:
    before = await call(session, "mcp_list_subagents")
    refused = await call(
        session,
        "mcp_spawn_subagent",
        {
            "task": "try everything",
            "tools": ["demo__echo", "demo__delete_everything", "mcp_request_admin_approval", "nope__x"],
        },
    )
    after = await call(session, "mcp_list_subagents")
    assert refused["success"] is False
    assert refused["error_class"] == "subagent_tool_not_allowed"
    assert refused["refused"] == ["demo__delete_everything", "mcp_request_admin_approval", "nope__x"]
    assert "demo__echo" in refused["permitted"] and "mcp_set_timer" in refused["permitted"]
    assert after["count"] == before["count"]  # nothing stored


async def test_the_models_tool_call_reaches_the_sandboxed_upstream_and_every_step_is_linked(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when(
        "ECHO-TASK",
        Behavior.calling("demo__echo", {"text": "hello upstream"}, then="It said: {tool_results}"),
    )
    echoes_before = (await upstream_calls(session)).get("echo", 0)
    spawned = await call(
        session, "mcp_spawn_subagent", {"task": "ECHO-TASK: greet the upstream", "tools": ["demo__echo"]}
    )
    assert spawned["success"] is True, spawned
    assert spawned["status"] == "completed"
    assert spawned["tools"] == ["demo__echo"]
    assert json.loads(spawned["result"].removeprefix("It said: "))["text"] == "hello upstream"
    assert (await upstream_calls(session))["echo"] == echoes_before + 1

    sent = [r.body for r in llm.requests if "ECHO-TASK" in json.dumps(r.body)]
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["demo__echo"]  # exactly the spawn's tools

    mine = of_subagent(chain(home), spawned["subagent_id"])
    assert [r["kind"] for r in mine] == [
        "subagent_spawned",
        "model_call",
        "gateway_call",
        "model_call",
        "subagent_completed",
    ]
    spawn, first_call, tool_call, second_call, _completed = mine
    assert spawned["spawn_receipt"] == {"seq": spawn["seq"], "sha256": spawn["sha256"]}
    link = tool_call["payload"]["subagent"]
    assert link["spawn_receipt"] == {"seq": spawn["seq"], "sha256": spawn["sha256"]}
    assert link["model_call_receipt"] == {"seq": first_call["seq"], "sha256": first_call["sha256"]}
    assert tool_call["payload"]["tool"] == "echo" and tool_call["payload"]["success"] is True
    assert first_call["payload"]["spawn_receipt"]["seq"] == spawn["seq"]
    assert [first_call["payload"]["model_call_index"], second_call["payload"]["model_call_index"]] == [1, 2]
    # the subagent's totals are its model calls' receipts, each added in its receipt's transaction
    used = [first_call["payload"]["usage"], second_call["payload"]["usage"]]
    assert spawned["usage"] == {key: used[0][key] + used[1][key] for key in used[0]}
    assert spawned["usage"]["total_tokens"] > 0


async def test_the_console_shows_a_subagents_tool_calls_in_order_with_their_links(
    session: Any, llm: FakeLLMServer, home: str, env: dict[str, str]
) -> None:
    from baton.console.views import subagent

    script = [[ToolCall("demo__echo", {"text": "one"})], [ToolCall("demo__lookup", {"customer": "ACME"})]]
    llm.when("CONSOLE-TASK", Behavior(tool_rounds=script))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "CONSOLE-TASK: two steps", "tools": ["demo__echo", "demo__lookup"]},
    )
    assert spawned["success"] is True, spawned
    runtime = Runtime.open(load_settings({"BATON_HOME": home}))
    try:
        page = subagent(runtime, spawned["subagent_id"])
    finally:
        runtime.close()
    models = [r for r in of_subagent(chain(home), spawned["subagent_id"]) if r["kind"] == "model_call"]
    assert [c["tool"] for c in page["tool_calls"]] == ["demo__echo", "demo__lookup"]
    assert [c["model_call_seq"] for c in page["tool_calls"]] == [models[0]["seq"], models[1]["seq"]]
    assert page["tool_calls"][0]["seq"] < page["tool_calls"][1]["seq"]
    assert page["tools"] == ["demo__echo", "demo__lookup"]
    html = console_page(env, f"/inbox/console/subagents/{spawned['subagent_id']}")
    table = html.split('id="tool-calls"', 1)[1].split("</section>", 1)[0]
    assert table.index("demo__echo") < table.index("demo__lookup")
    assert table.count('class="tool-call"') == 2
    assert f">{models[0]['seq']}<" in table


def console_page(env: dict[str, str], path: str) -> str:
    """One page of ``baton console`` over the test's store, after logging in with its one-run token."""
    import subprocess
    import sys

    import httpx

    from tests.hitl.helpers import free_port
    from tests.test_serve_terminal import read_stderr_until

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", "console", "--bind", f"127.0.0.1:{port}"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        seen = read_stderr_until(process, b"not stored anywhere): ").decode()
        if "\n" not in seen.split("not stored anywhere): ", 1)[-1]:
            seen += read_stderr_until(process, b"\n").decode()
        token = seen.split("not stored anywhere): ", 1)[1].split()[0]
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=120) as client:
            client.post("/inbox/login", data={"token": token}, headers={"Origin": base})
            page = client.get(path)
            assert page.status_code == 200, page.text[:500]
            return page.text
    finally:
        process.terminate()
        process.communicate(timeout=300)


async def test_a_follow_up_message_keeps_the_spawns_tools(session: Any, llm: FakeLLMServer) -> None:
    llm.when("FIRST-TURN", Behavior(reply="ready"))
    spawned = await call(
        session, "mcp_spawn_subagent", {"task": "FIRST-TURN: wait for orders", "tools": ["demo__echo"]}
    )
    second = Behavior.calling("demo__echo", {"text": "second"}, then="done: {tool_results}")
    llm.rules.insert(0, ("SECOND-TURN", second))  # ahead of FIRST-TURN, which the history still holds
    answered = await call(
        session,
        "mcp_send_message_to_subagent",
        {"subagent_id": spawned["subagent_id"], "message": "SECOND-TURN: echo now"},
    )
    assert answered["success"] is True, answered
    assert "second" in answered["response"]
    follow_up = next(r.body for r in llm.requests if "SECOND-TURN" in json.dumps(r.body))
    assert [t["function"]["name"] for t in follow_up["tools"]] == ["demo__echo"]


def offered(llm: FakeLLMServer, marker: str) -> list[str]:
    """The tool names the first model request carrying ``marker`` offered."""
    body = next(r.body for r in llm.requests if marker in json.dumps(r.body))
    return [t["function"]["name"] for t in body.get("tools") or []]


async def test_a_demotion_stops_the_next_call_and_hides_the_tool_until_the_adapter_is_promoted_again(
    session: Any, llm: FakeLLMServer, home: str, env: dict[str, str]
) -> None:
    """The process keeps each tool list built: a demotion (by another process) must still stop a call of
    a turn whose list was built before it, hide the tool from the next turn, and a promotion offer it again."""
    from baton.gateway.serving.promotion import demote, promote

    echoes_before = (await upstream_calls(session)).get("echo", 0)
    llm.when("DEMOTED-1", Behavior.calling("demo__echo", {"text": "one"}, then="first: {tool_results}"))
    runtime = Runtime.open(load_settings(env))
    demoted = False
    try:
        llm.hold()  # the turn's tool list is built; its first model call waits while the adapter is demoted
        try:
            spawned = await call(
                session,
                "mcp_spawn_subagent",
                {"task": "DEMOTED-1: echo", "tools": ["demo__echo"], "mode": "async"},
            )
            assert await anyio.to_thread.run_sync(llm.wait_for_in_flight, 1)
            demote(runtime, "demo")
            demoted = True
        finally:
            llm.release()
        try:
            first = await settled(session, spawned["subagent_id"])
            assert first["status"] == "completed", first
            assert "adapter_not_promoted" in first["result"]  # the model saw the refusal as a tool error
            assert offered(llm, "DEMOTED-1") == ["demo__echo"]
            mine = of_subagent(chain(home), spawned["subagent_id"])
            refused = [r["payload"] for r in mine if r["kind"] == "gateway_call"]
            assert [(c["success"], c["error_class"]) for c in refused] == [(False, "adapter_not_promoted")]

            llm.rules.insert(0, ("DEMOTED-2", Behavior(reply="no tools now")))
            second = await call(
                session,
                "mcp_send_message_to_subagent",
                {"subagent_id": spawned["subagent_id"], "message": "DEMOTED-2: and now?"},
            )
            assert second["success"] is True, second
            assert offered(llm, "DEMOTED-2") == []  # the demoted adapter's tool is not offered
        finally:
            if demoted:  # the other tests of this module need demo live, whatever happened here
                promote(runtime, "demo")
    finally:
        runtime.close()
    third = Behavior.calling("demo__echo", {"text": "three"}, then="third: {tool_results}")
    llm.rules.insert(0, ("DEMOTED-3", third))
    answered = await call(
        session,
        "mcp_send_message_to_subagent",
        {"subagent_id": spawned["subagent_id"], "message": "DEMOTED-3: echo again"},
    )
    assert answered["success"] is True, answered
    assert offered(llm, "DEMOTED-3") == ["demo__echo"]
    assert json.loads(answered["response"].removeprefix("third: "))["text"] == "three"
    assert (await upstream_calls(session))["echo"] == echoes_before + 1  # only the third turn's call ran


async def test_an_approval_gated_call_names_the_subagent_and_a_sync_spawn_returns_waiting_for_approval(
    session: Any, llm: FakeLLMServer, home: str, env: dict[str, str]
) -> None:
    llm.when(
        "PAY-TASK",
        Behavior.calling("demo__transfer", {"to": "bob", "amount": 5}, then="Result: {tool_results}"),
    )
    transfers_before = (await upstream_calls(session)).get("transfer", 0)
    spawned = await call(
        session, "mcp_spawn_subagent", {"task": "PAY-TASK: pay bob", "tools": ["demo__transfer"]}
    )
    assert spawned["success"] is True, spawned
    assert spawned["status"] == "waiting_for_approval"
    request = await pending_request(session, spawned["subagent_id"])
    assert spawned["request_id"] == request["request_id"]
    assert request["context"]["parent_agent"] == "stdio:mcp"  # the official client's claim
    assert spawned["subagent_id"] in request["message"]
    assert request["context"]["arguments"] == {"amount": 5, "to": "bob"}
    assert (await upstream_calls(session)).get("transfer", 0) == transfers_before  # nothing sent yet
    # who asked, as the server recorded it, and what the person deciding is shown
    asked = next(
        r["payload"]
        for r in chain(home)
        if r["kind"] == "hitl_requested" and r["payload"]["request_id"] == request["request_id"]
    )
    origin = asked["provenance"]
    assert (origin["subagent_id"], origin["parent_agent"]) == (spawned["subagent_id"], "stdio:mcp")
    assert (origin["adapter_id"], origin["tool"], origin["risk_class"]) == ("demo", "transfer", "high")
    html = await anyio.to_thread.run_sync(
        console_page, env, f"/inbox/console/requests/{request['request_id']}"
    )
    assert f'for subagent <b id="subagent">{spawned["subagent_id"]}</b>' in html
    assert '<dt>Spawned by</dt><dd class="rq-hash">stdio:mcp</dd>' in html
    assert 'id="risk-class">risk: high</span>' in html

    decided = await call(
        session, "mcp_respond_to_request", {"request_id": request["request_id"], "approved": True}
    )
    assert decided["success"] is True
    status = await settled(session, spawned["subagent_id"])
    assert status["status"] == "completed", status
    assert "transferred" in status["result"]
    assert (await upstream_calls(session))["transfer"] == transfers_before + 1

    mine = of_subagent(chain(home), spawned["subagent_id"])
    gateway = next(r for r in mine if r["kind"] == "gateway_call")
    assert gateway["payload"]["approval"]["request_id"] == request["request_id"]
    decision = next(
        r
        for r in chain(home)
        if r["kind"] == "hitl_decided" and r["payload"]["request_id"] == request["request_id"]
    )
    assert gateway["payload"]["approval"]["decision_receipt_seq"] == decision["seq"]
    model_call = next(r for r in mine if r["kind"] == "model_call")
    assert gateway["payload"]["subagent"]["model_call_receipt"]["seq"] == model_call["seq"]


async def test_a_rejected_call_reaches_the_model_as_a_tool_error_it_answers(
    session: Any, llm: FakeLLMServer
) -> None:
    llm.when(
        "REFUSED-PAY",
        Behavior.calling("demo__transfer", {"to": "bob", "amount": 5}, then="I could not: {tool_results}"),
    )
    transfers_before = (await upstream_calls(session)).get("transfer", 0)
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "REFUSED-PAY: pay bob", "tools": ["demo__transfer"], "mode": "async"},
    )
    request = await pending_request(session, spawned["subagent_id"])
    await call(session, "mcp_respond_to_request", {"request_id": request["request_id"], "approved": False})
    status = await settled(session, spawned["subagent_id"])
    assert status["status"] == "completed", status
    assert "approval_denied" in status["result"]
    assert (await upstream_calls(session)).get("transfer", 0) == transfers_before


async def test_a_canary_in_an_upstream_tools_output_never_reaches_the_model(
    session: Any, llm: FakeLLMServer
) -> None:
    llm.when(
        "LOOKUP-TASK", Behavior.calling("demo__lookup", {"customer": "ACME"}, then="Found: {tool_results}")
    )
    spawned = await call(
        session, "mcp_spawn_subagent", {"task": "LOOKUP-TASK: summarize ACME", "tools": ["demo__lookup"]}
    )
    assert spawned["success"] is True, spawned
    assert "ACME Corp" in spawned["result"]  # the rest of the record did reach the model
    assert CANARY not in llm.all_request_text()
    assert CANARY not in spawned["result"]


async def test_the_tool_limit_stops_a_model_that_keeps_calling_tools(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when("LOOP-TASK", Behavior(tool_rounds=[[ToolCall("demo__echo", {"text": "again"})]] * 6))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "LOOP-TASK: forever", "tools": ["demo__echo"], "subagent_tool_limit": 2},
    )
    assert spawned["success"] is False
    assert spawned["error_class"] == "subagent_tool_limit_reached"
    kinds = [r["kind"] for r in of_subagent(chain(home), spawned["subagent_id"])]
    assert kinds.count("gateway_call") == 2


@pytest.mark.parametrize(
    ("budget", "limit"),
    # the first answer's usage alone passes either limit (the loopback model counts every prompt word,
    # and kimi-k3 is priced)
    [("max_total_tokens", 5), ("max_cost_usd", 1e-6)],
)
async def test_a_model_call_that_spends_the_subagents_budget_stops_the_turn_before_the_next_model_call(
    session: Any, llm: FakeLLMServer, home: str, budget: str, limit: float
) -> None:
    marker = f"BUDGET-TASK-{budget}"
    llm.when(marker, Behavior.calling("demo__echo", {"text": "spend"}, then="never sent"))
    echoes_before = (await upstream_calls(session)).get("echo", 0)
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": f"{marker}: one tool round", "tools": ["demo__echo"], budget: limit},
    )
    assert spawned["success"] is False, spawned
    assert spawned["error_class"] == "budget_exceeded"
    sent = [r.body for r in llm.requests if marker in json.dumps(r.body)]
    assert len(sent) == 1  # the request that would carry the tool's result never reached the model
    assert (await upstream_calls(session))["echo"] == echoes_before + 1  # the tool round itself ran

    mine = of_subagent(chain(home), spawned["subagent_id"])
    assert [r["kind"] for r in mine] == ["subagent_spawned", "model_call", "gateway_call", "subagent_failed"]
    first_call, failed = mine[1], mine[3]
    first = first_call["payload"]
    assert (first["usage"]["total_tokens"] if budget == "max_total_tokens" else first["cost_usd"]) >= limit
    assert failed["payload"]["error_class"] == "budget_exceeded"
    status = await call(session, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]})
    assert status["status"] == "failed" and status["error_class"] == "budget_exceeded"
    assert status["usage"] == first_call["payload"]["usage"]


async def test_a_cancel_stops_the_pending_tool_call_and_nothing_runs_after_the_cancel_receipt(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when("CANCEL-PAY", Behavior.calling("demo__transfer", {"to": "eve", "amount": 9}))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "CANCEL-PAY: pay eve", "tools": ["demo__transfer"], "mode": "async"},
    )
    request = await pending_request(session, spawned["subagent_id"])
    cancelled = await call(session, "mcp_cancel_subagent", {"subagent_id": spawned["subagent_id"]})
    assert cancelled["success"] is True and cancelled["cancelled_in_flight_call"] is True
    late = await call(
        session, "mcp_respond_to_request", {"request_id": request["request_id"], "approved": True}
    )
    status = await call(session, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]})
    mine = of_subagent(chain(home), spawned["subagent_id"])
    kinds = [r["kind"] for r in mine]
    assert status["status"] == "cancelled"
    assert kinds[-1] == "subagent_cancelled", kinds
    assert kinds.count("gateway_call") == 1  # the pending call ended (refused) before the cancel receipt
    assert mine[kinds.index("gateway_call")]["payload"]["success"] is False
    # the request was withdrawn before the cancel receipt; a decision after it is refused and changes nothing
    everything = chain(home)
    withdrawn = [r for r in everything if r["kind"] == "hitl_withdrawn"]
    assert [r["payload"]["request_id"] for r in withdrawn][-1] == request["request_id"]
    assert withdrawn[-1]["seq"] < mine[-1]["seq"]
    assert late["success"] is False and late["error_class"] == "hitl_request_expired"
    assert [r["kind"] for r in of_subagent(everything, spawned["subagent_id"])] == kinds
    assert "eve" not in json.dumps(await upstream_calls(session))


async def test_a_cancel_cuts_a_slow_model_call_with_no_model_receipt_after_it(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when("SLOW-MODEL", Behavior(delay_seconds=3600))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "SLOW-MODEL: think hard", "tools": ["demo__echo"], "mode": "async"},
    )
    with anyio.fail_after(300):
        while not any("SLOW-MODEL" in json.dumps(r.body) for r in llm.requests):
            await anyio.sleep(0.02)
    await call(session, "mcp_cancel_subagent", {"subagent_id": spawned["subagent_id"]})
    with anyio.fail_after(300):  # the loopback model saw the client hang up
        while not any(r.aborted for r in llm.requests if "SLOW-MODEL" in json.dumps(r.body)):
            await anyio.sleep(0.05)
    kinds = [r["kind"] for r in of_subagent(chain(home), spawned["subagent_id"])]
    assert kinds == ["subagent_spawned", "subagent_cancelled"]


async def test_notifications_cancelled_on_a_sync_spawn_stops_its_model_call(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when("SYNC-SLOW", Behavior(delay_seconds=3600))
    before = {row["subagent_id"] for row in (await call(session, "mcp_list_subagents"))["subagents"]}
    async with anyio.create_task_group() as group:
        group.start_soon(
            call, session, "mcp_spawn_subagent", {"task": "SYNC-SLOW: ponder", "tools": ["demo__echo"]}
        )
        with anyio.fail_after(300):
            while not any("SYNC-SLOW" in json.dumps(r.body) for r in llm.requests):
                await anyio.sleep(0.02)
        group.cancel_scope.cancel()  # the client sends notifications/cancelled for the spawn
    with anyio.fail_after(300):
        while not any(r.aborted for r in llm.requests if "SYNC-SLOW" in json.dumps(r.body)):
            await anyio.sleep(0.05)
    listed = (await call(session, "mcp_list_subagents"))["subagents"]
    (subagent_id,) = [row["subagent_id"] for row in listed if row["subagent_id"] not in before]
    status = await settled(session, subagent_id)
    assert status["status"] == "cancelled"
    with anyio.fail_after(300):
        while [r["kind"] for r in of_subagent(chain(home), subagent_id)][-1] != "subagent_cancelled":
            await anyio.sleep(0.05)
    assert [r["kind"] for r in of_subagent(chain(home), subagent_id)] == [
        "subagent_spawned",
        "subagent_cancelled",
    ]


async def test_a_built_in_tool_call_is_a_tool_call_receipt_linked_to_the_subagent(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    llm.when("TIMERS-TASK", Behavior.calling("mcp_list_timers", {}, then="timers: {tool_results}"))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "TIMERS-TASK: what is scheduled?", "tools": ["mcp_list_timers"]},
    )
    assert spawned["success"] is True, spawned
    assert '"timers"' in spawned["result"]
    mine = of_subagent(chain(home), spawned["subagent_id"])
    assert [r["kind"] for r in mine] == [
        "subagent_spawned",
        "model_call",
        "tool_call",
        "model_call",
        "subagent_completed",
    ]
    assert mine[2]["payload"]["tool"] == "mcp_list_timers"
    assert mine[2]["payload"]["subagent"]["model_call_receipt"]["seq"] == mine[1]["seq"]
