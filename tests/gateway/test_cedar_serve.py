"""A Cedar call policy through a real ``python -m baton serve`` (stdio, the official MCP client).

One promoted adapter (the test server) pins a policy that permits queries, forbids ``DROP``, asks two
distinct people for a transfer (and for a payout over 100, which a plain permit also matches), cannot evaluate an ``echo`` without ``text`` (fails closed) and says
nothing of ``status`` (default deny). Two people approve: this test's OS account with ``baton hitl
approve`` (the CLI names the real uid's account, whatever ``LOGNAME`` says) and ``ben``, an enrolled person,
with his passkey (the decision the inbox makes once his assertion verified). Every ``gateway_call`` receipt
carries the pinned policy's sha256.
"""

from __future__ import annotations

import hashlib
import os
import pwd
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from baton.config import load_settings
from baton.hitl.broker import Decision, get_broker
from baton.identity.people import People
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli
from tests.conftest import baton_environ, call, server_parameters, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

POLICY = """\
@id("queries")
permit(principal, action == Action::"query", resource);
@id("no-drop")
forbid(principal, action == Action::"query", resource)
  when { context.arguments.sql like "*DROP*" };
@id("two-people-transfer")
@approvals("2")
permit(principal, action == Action::"transfer", resource);
@id("wire-needs-five")
@approvals("5")
permit(principal, action == Action::"wire", resource);
@id("echo")
permit(principal, action == Action::"echo", resource);
@id("no-secret-echo")
forbid(principal, action == Action::"echo", resource)
  when { context.arguments.text like "*secret*" };
@id("counts")
permit(principal, action == Action::"calls", resource);
@id("no-intruders")
forbid(principal == Agent::"intruder", action, resource);
@id("payouts")
permit(principal, action == Action::"payout", resource);
@id("big-payouts-need-two")
@approvals("2")
permit(principal, action == Action::"payout", resource) when { context.arguments.amount > 100 };
@id("friends")
permit(principal == Agent::"friend", action == Action::"status", resource);
"""
POLICY_SHA256 = hashlib.sha256(POLICY.encode()).hexdigest()
#: The OS account this test runs as: the person ``baton hitl approve`` decides as.
ME = pwd.getpwuid(os.getuid()).pw_name
TOOLS = [
    tool("query", sql="string"),
    tool("transfer", to="string", amount="integer"),
    tool("wire", to="string", amount="integer"),
    tool("echo", text="string"),
    tool("status"),
    tool("calls"),
    tool("payout", to="string", amount="integer"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A store with the ``db`` adapter live, its Cedar policy pinned; ``status`` is allowed by the TOML only."""
    home = tmp_path_factory.mktemp("cedar") / "home"
    environment = baton_environ(home, HITL_TIMEOUT_SECONDS="3600", BATON_HITL_PROGRESS_SECONDS="1")
    with NpmRegistryServer() as registry:
        with registry_runtime(home, registry) as runtime:
            make_live(
                runtime,
                document("db", publish(registry), TOOLS),
                allowed=["query", "transfer", "wire", "echo", "status", "calls", "payout"],
                call_policy=POLICY,
            )
            People(runtime).add("ben")
        yield environment


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


def call_receipts(env: dict[str, str], tool_name: str) -> list[dict[str, Any]]:
    """The ``gateway_call`` receipt payloads of ``db``'s ``tool_name``, oldest first."""
    runtime = Runtime.open(load_settings(env))
    try:
        found = runtime.receipts.list(kind="gateway_call")
        return [r.payload for r in found if r.payload["tool"] == tool_name]
    finally:
        runtime.close()


def hitl_receipts(env: dict[str, str], kind: str, request_id: str) -> list[dict[str, Any]]:
    """The payloads of ``kind`` receipts about ``request_id``."""
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind=kind) if r.payload["request_id"] == request_id]
    finally:
        runtime.close()


def decide_on_the_cli(env: dict[str, str], verb: str, request_id: str, claiming: str = "ana") -> Any:
    """``baton hitl approve|reject ID`` run by this OS account, its environment claiming another name."""
    return run_cli({**env, "LOGNAME": claiming, "USER": claiming}, "hitl", verb, request_id)


def ben_decides(env: dict[str, str], approved: bool, request_id: str) -> None:
    """``ben``'s decision with his passkey, as the inbox records it (the server notices it in the store)."""
    runtime = Runtime.open(load_settings(env))
    try:
        get_broker(runtime).respond(request_id, Decision(approved, via="passkey", decided_by="ben"))
    finally:
        runtime.close()


async def upstream_calls(session: Any) -> dict[str, int]:
    """How often the upstream process ran each tool (its own count, through the permitted ``calls``)."""
    import json

    result = await call(session, "db__calls")
    assert result["success"], result
    counts: dict[str, int] = json.loads(result["text"])
    return counts


async def pending_transfer(session: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The pending approval request of a transfer with ``arguments``."""
    with anyio.fail_after(300):  # only stops a hang
        while True:
            listed = (await call(session, "mcp_list_pending_requests"))["requests"]
            found = [r for r in listed if r["context"].get("arguments") == arguments]
            if found:
                return dict(found[0])
            await anyio.sleep(0.05)


async def test_a_policy_asking_two_approvals_runs_the_call_only_after_two_distinct_people(
    session: Any, env: dict[str, str]
) -> None:
    arguments = {"to": "bob", "amount": 5}
    result: dict[str, Any] = {}

    async def transfer() -> None:
        result.update(await call(session, "db__transfer", arguments))

    with anyio.fail_after(600):
        async with anyio.create_task_group() as group:
            group.start_soon(transfer)
            request = await pending_transfer(session, arguments)
            request_id = request["request_id"]
            first = decide_on_the_cli(env, "approve", request_id)
            assert first.returncode == 0, first.stderr
            again = decide_on_the_cli(
                env, "approve", request_id, claiming="bob"
            )  # one OS account counts once
            assert again.returncode != 0 and "hitl_approval_duplicate" in again.stderr
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert (status["status"], status["required_approvals"], status["approvals"]) == (
                "pending",
                2,
                [ME],
            )
            assert (await upstream_calls(session)).get("transfer") is None  # one approval is not enough
            await anyio.to_thread.run_sync(ben_decides, env, True, request_id)
    assert result["success"] is True, result
    assert result["text"] == 'transferred {"amount": 5, "to": "bob"}'
    assert (await upstream_calls(session))["transfer"] == 1
    (partial,) = hitl_receipts(env, "hitl_partial_approval", request_id)
    assert (partial["decided_by"], partial["approvals"], partial["required_approvals"]) == (ME, 1, 2)
    (decided,) = hitl_receipts(env, "hitl_decided", request_id)
    assert decided["approvers"] == [ME, "ben"] and decided["decision"] == "approved"
    receipt = call_receipts(env, "transfer")[-1]
    assert receipt["success"] is True and receipt["approval"]["request_id"] == request_id
    assert receipt["call_policy_sha256"] == POLICY_SHA256
    assert receipt["call_policy_decision"] == {
        "effect": "approval",
        "approvals": 2,
        "reasons": ["two-people-transfer"],
    }


async def test_one_rejection_after_an_approval_stops_the_call(session: Any, env: dict[str, str]) -> None:
    arguments = {"to": "mallory", "amount": 900}
    result: dict[str, Any] = {}
    before = (await upstream_calls(session)).get("transfer", 0)

    async def transfer() -> None:
        result.update(await call(session, "db__transfer", arguments))

    with anyio.fail_after(600):
        async with anyio.create_task_group() as group:
            group.start_soon(transfer)
            request_id = (await pending_transfer(session, arguments))["request_id"]
            assert decide_on_the_cli(env, "approve", request_id).returncode == 0
            await anyio.to_thread.run_sync(ben_decides, env, False, request_id)
    assert (result["success"], result["error_class"]) == (False, "approval_denied")
    assert (await upstream_calls(session)).get("transfer", 0) == before  # nothing reached the upstream
    (decided,) = hitl_receipts(env, "hitl_decided", request_id)
    assert decided["decision"] == "rejected" and decided["decided_by"] == "ben"
    receipt = call_receipts(env, "transfer")[-1]
    assert (receipt["success"], receipt["error_class"]) == (False, "approval_denied")
    assert receipt["approval"]["request_id"] == request_id
    assert receipt["call_policy_sha256"] == POLICY_SHA256


async def test_permit_forbid_and_default_deny_each_call_with_the_pinned_hash_receipted(
    session: Any, env: dict[str, str]
) -> None:
    permitted = await call(session, "db__query", {"sql": "SELECT 1"})
    assert permitted["success"] is True and permitted["text"] == "called query"
    dropped = await call(session, "db__query", {"sql": "DROP TABLE t"})
    assert dropped["error_class"] == "gateway_policy_forbidden"
    assert dropped["reasons"] == ["no-drop"] and "forbidden by no-drop" in dropped["error"]
    assert dropped["policy_sha256"] == POLICY_SHA256
    unmentioned = await call(session, "db__status")  # allowed by the TOML, permitted by no policy
    assert unmentioned["error_class"] == "gateway_policy_forbidden"
    assert unmentioned["reasons"] == [] and "default deny" in unmentioned["error"]
    counts = await upstream_calls(session)
    assert counts.get("query") == 1 and "status" not in counts  # only the permitted call ran

    queries = call_receipts(env, "query")[-2:]
    assert [(r["success"], r["error_class"]) for r in queries] == [
        (True, None),
        (False, "gateway_policy_forbidden"),
    ]
    assert [r["call_policy_decision"] for r in queries] == [
        {"effect": "permit", "approvals": 0, "reasons": ["queries"]},
        {"effect": "forbid", "approvals": 0, "reasons": ["no-drop"]},
    ]
    status = call_receipts(env, "status")[0]  # the default-deny call (a claim of friend is denied alike)
    assert status["call_policy_decision"] == {"effect": "forbid", "approvals": 0, "reasons": []}
    snapshot = next(Path(env["BATON_HOME"]).rglob("call-policy.cedar"))
    assert hashlib.sha256(snapshot.read_bytes()).hexdigest() == POLICY_SHA256
    runtime = Runtime.open(load_settings(env))
    try:
        every = [r.payload for r in runtime.receipts.list(kind="gateway_call")]
    finally:
        runtime.close()
    assert every and {r["call_policy_sha256"] for r in every} == {POLICY_SHA256}


async def test_a_policy_that_cannot_decide_or_asks_too_many_approvals_fails_closed(
    session: Any, env: dict[str, str]
) -> None:
    # Cedar skips the erroring no-secret-echo forbid and would answer Allow from "echo": baton refuses
    errored = await call(session, "db__echo", {})
    assert errored["error_class"] == "gateway_policy_error"
    assert "refused" in errored["error"] and "does not have the attribute `text`" in errored["error"]
    assert (await call(session, "db__echo", {"text": "a secret"}))[
        "error_class"
    ] == "gateway_policy_forbidden"
    assert (await call(session, "db__echo", {"text": "hello"}))["text"] == "hello"
    capped = await call(session, "db__wire", {"to": "bob", "amount": 1})  # 5 > the default cap of 3
    assert (
        capped["error_class"] == "gateway_policy_error"
        and "BATON_HITL_MAX_REQUIRED_APPROVALS" in capped["error"]
    )
    assert (await call(session, "mcp_list_pending_requests"))["requests"] == []  # no request was created
    counts = await upstream_calls(session)
    assert counts.get("echo") == 1 and "wire" not in counts
    (wire,) = call_receipts(env, "wire")
    assert (wire["error_class"], wire["call_policy_sha256"]) == ("gateway_policy_error", POLICY_SHA256)
    assert call_receipts(env, "echo")[0]["call_policy_decision"]["effect"] == "error"


@asynccontextmanager
async def named_session(env: dict[str, str], client_name: str) -> AsyncIterator[Any]:
    """A stdio session whose client introduces itself as ``client_name``."""
    info = types.Implementation(name=client_name, version="1.0")
    async with (
        stdio_client(server_parameters(env)) as (read, write),
        ClientSession(read, write, client_info=info) as client,
    ):
        await client.initialize()
        yield client


async def test_the_operators_agent_name_is_the_principal_and_a_client_cannot_claim_one(
    env: dict[str, str],
) -> None:
    """The intruder renamed to ``friend`` is still ``Agent::"intruder"``; without ``BATON_AGENT_NAME`` a
    client calling itself ``friend`` is ``Agent::"stdio:friend"`` and gets none of friend's permits."""
    async with named_session({**env, "BATON_AGENT_NAME": "intruder"}, "friend") as intruder:
        refused = await call(intruder, "db__query", {"sql": "SELECT 2"})
    async with named_session(env, "friend") as claim:
        claimed = await call(claim, "db__status")
    assert refused["error_class"] == "gateway_policy_forbidden" and refused["reasons"] == ["no-intruders"]
    receipt = call_receipts(env, "query")[-1]
    assert (receipt["agent"], receipt["call_policy_decision"]["reasons"]) == ("intruder", ["no-intruders"])
    assert claimed["error_class"] == "gateway_policy_forbidden" and claimed["reasons"] == []
    assert call_receipts(env, "status")[-1]["agent"] == "stdio:friend"


async def test_the_strictest_matching_policy_sets_the_approvals(session: Any, env: dict[str, str]) -> None:
    """A payout over 100 matches a plain permit and one asking two people: it needs two, not none."""
    small = await call(session, "db__payout", {"to": "bob", "amount": 5})
    assert small["success"] is True, small
    arguments = {"to": "eve", "amount": 500}
    result: dict[str, Any] = {}

    async def payout() -> None:
        result.update(await call(session, "db__payout", arguments))

    with anyio.fail_after(600):
        async with anyio.create_task_group() as group:
            group.start_soon(payout)
            while not result:  # a call that ran without asking anyone is a failure, not a hang
                listed = (await call(session, "mcp_list_pending_requests"))["requests"]
                found = [r for r in listed if r["context"].get("arguments") == arguments]
                if found:
                    break
                await anyio.sleep(0.05)
            assert not result, result
            request_id = found[0]["request_id"]
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["required_approvals"] == 2
            assert decide_on_the_cli(env, "reject", request_id).returncode == 0
    assert result["error_class"] == "approval_denied"
    assert (await upstream_calls(session))["payout"] == 1  # only the small one ran
    decisions = [r["call_policy_decision"] for r in call_receipts(env, "payout")]
    assert [(d["effect"], d["approvals"], sorted(d["reasons"])) for d in decisions] == [
        ("permit", 0, ["payouts"]),
        ("approval", 2, ["big-payouts-need-two", "payouts"]),
    ]
