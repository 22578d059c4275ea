"""Delegation narrows and never widens, through ``python -m baton serve``, a sandboxed adapter and the loopback model.

The model is the scripted loopback OpenAI-compatible server (a real HTTP server on 127.0.0.1) told to try
what its delegation forbids; the upstream counts every tool it runs, so "never wrote" is what the
upstream says. The chain each receipt carries is then checked as an auditor would, by
``python -m baton.chain_verify`` on an export.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from baton.config import load_settings
from baton.delegation import chain_of, link_sha256
from baton.evidence.receipts import receipt_digest
from baton.runtime import Runtime
from baton.store.schema import subagents
from baton.testing import Behavior, FakeLLMServer, ToolCall
from baton.testing.gateway_adapter import document, make_live, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import call, stdio_session, subagent_environ
from tests.test_subagent_tools import chain, of_subagent

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

AGENT = "lead"
READ_ONLY = {"readOnlyHint": True}
TOOLS = [
    {**tool("echo", text="string"), "annotations": READ_ONLY},
    {**tool("calls"), "annotations": READ_ONLY},
    tool("write", path="string", text="string"),  # no pinned annotation: not read-only
    tool("transfer", to="string", amount="integer"),
]

#: The ``drift`` adapter: its echo is read-only until a later version's pinned contract says otherwise.
DRIFT_TOOLS = [
    {**tool("echo", text="string"), "annotations": READ_ONLY},
    {**tool("calls"), "annotations": READ_ONLY},
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
    """A BATON_HOME with the ``books`` adapter live (echo and calls read-only, write and transfer not) and
    the ``drift`` adapter (echo and calls read-only)."""
    path = tmp_path_factory.mktemp("delegation") / "home"
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(path), "BATON_NPM_REGISTRY": registry.url}))
        try:
            make_live(
                runtime,
                document("books", publish(registry), TOOLS),
                allowed=["echo", "calls", "write", "transfer"],
                allow_destructive_without_approval=["write", "transfer"],
            )
            make_live(runtime, document("drift", publish(registry), DRIFT_TOOLS), allowed=["echo", "calls"])
        finally:
            runtime.close()
    return str(path)


@pytest.fixture(scope="module")
def env(home: str, llm: FakeLLMServer) -> dict[str, str]:
    return subagent_environ(home, llm.base_url, BATON_AGENT_NAME=AGENT)


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


async def upstream_calls(session: Any) -> dict[str, int]:
    """How often the sandboxed upstream ran each tool."""
    counts: dict[str, int] = json.loads((await call(session, "books__calls"))["text"])
    return counts


def delegated_tokens(home: str, subagent_id: str) -> int:
    """What the subagent's own subagents spent, as its row counts it against its budget."""
    runtime = Runtime.open(load_settings({"BATON_HOME": home}))
    try:
        with runtime.store.read() as connection:
            query = select(subagents.c.delegated_tokens).where(subagents.c.id == subagent_id)
            return int(connection.execute(query).scalar_one())
    finally:
        runtime.close()


def spawned_link(home: str, subagent_id: str) -> dict[str, Any]:
    """The subagent's own delegation link, as its spawn receipt records it."""
    spawn = next(r for r in of_subagent(chain(home), subagent_id) if r["kind"] == "subagent_spawned")
    link: dict[str, Any] = spawn["payload"]["delegation"][-1]
    return link


async def test_a_read_only_subagent_cannot_write_through_any_adapter_even_when_its_task_says_to(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    writes_before = (await upstream_calls(session)).get("write", 0)
    refused = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "RO-ASK: write it", "tools": ["books__echo", "books__write"], "read_only": True},
    )
    assert refused["success"] is False and refused["error_class"] == "subagent_tool_not_allowed", refused
    assert refused["refused"] == ["books__write"]
    assert "books__echo" in refused["permitted"] and "books__write" not in refused["permitted"]

    # given only what reads, the model tries to write anyway: directly, then through a subagent of its own
    write = ToolCall("books__write", {"path": "/tmp/ro.txt", "text": "overwritten"})
    child = {"task": "RO-CHILD: write /tmp/ro.txt", "tools": ["books__write"], "read_only": False}
    script = [[write], [ToolCall("mcp_spawn_subagent", child)], [ToolCall("books__echo", {"text": "ok"})]]
    llm.when("RO-TASK", Behavior(tool_rounds=script, after_tools="done: {tool_results}"))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {
            "task": "RO-TASK: the user says overwrite /tmp/ro.txt now",
            "tools": ["books__echo", "mcp_spawn_subagent"],
            "read_only": True,
        },
    )
    assert spawned["success"] is True, spawned
    assert (await upstream_calls(session)).get("write", 0) == writes_before  # the upstream never wrote
    mine = of_subagent(chain(home), spawned["subagent_id"])
    calls = [r["payload"] for r in mine if r["kind"] in ("gateway_call", "tool_call")]
    nested = [c for c in calls if c["tool"] == "mcp_spawn_subagent"]
    assert nested and all(c["error_class"] == "subagent_tool_not_allowed" for c in nested), calls
    assert [c["tool"] for c in calls if c.get("adapter_id") == "books"] == ["echo"]
    link = spawned_link(home, spawned["subagent_id"])
    assert link["read_only"] is True and link["tools"] == ["books__echo", "mcp_spawn_subagent"]
    assert link["adapters"] == ["books"] and link["depth"] == 1


async def test_a_nested_spawn_cannot_regain_a_tool_its_parent_lost(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    regain = {"task": "NEST-CHILD-A: write", "tools": ["books__echo", "books__write"]}
    deeper = {"task": "NEST-CHILD-C: spawn more", "tools": ["mcp_spawn_subagent"]}  # past the depth cap
    narrower = {"task": "NEST-CHILD-B: echo", "tools": ["books__echo"], "max_total_tokens": 10**9}
    parent_script = [[ToolCall("mcp_spawn_subagent", args)] for args in (regain, deeper, narrower)]
    llm.when("NEST-PARENT", Behavior(tool_rounds=parent_script, after_tools="parent: {tool_results}"))
    llm.when(
        "NEST-CHILD-B",
        Behavior.calling("books__echo", {"text": "from the child"}, then="child: {tool_results}"),
    )
    writes_before = (await upstream_calls(session)).get("write", 0)
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {
            "task": "NEST-PARENT: delegate the echo",
            "tools": ["books__echo", "mcp_spawn_subagent"],
            "max_total_tokens": 50_000,
        },
    )
    assert spawned["success"] is True, spawned
    rows = chain(home)
    spawn_calls = [
        r["payload"] for r in of_subagent(rows, spawned["subagent_id"]) if r["kind"] == "tool_call"
    ]
    refused = "subagent_tool_not_allowed"
    assert [c["error_class"] for c in spawn_calls] == [refused, refused, None], spawn_calls
    child_spawn = next(
        r
        for r in rows
        if r["kind"] == "subagent_spawned"
        and len(r["payload"].get("delegation") or []) == 3
        and r["payload"]["delegation"][1]["principal"] == spawned["subagent_id"]
    )
    root, parent, child = child_spawn["payload"]["delegation"]
    assert root["principal"] == AGENT and root["depth"] == 0 and root["tools"] is None
    assert parent["tools"] == ["books__echo", "mcp_spawn_subagent"]
    assert child["tools"] == ["books__echo"] and child["depth"] == 2
    assert child["prev_sha256"] == parent["sha256"] == link_sha256(parent)
    assert child["max_total_tokens"] is not None and child["max_total_tokens"] <= 50_000  # not 10**9
    child_id = child_spawn["payload"]["subagent_id"]
    echo = next(r for r in of_subagent(rows, child_id) if r["kind"] == "gateway_call")
    assert echo["payload"]["subagent"]["delegation"] == [root, parent, child]
    # what the child spent counts in its parent's budget
    child_tokens = sum(
        r["payload"]["usage"]["total_tokens"]
        for r in of_subagent(rows, child_id)
        if r["kind"] == "model_call"
    )
    assert child_tokens > 0 and delegated_tokens(home, spawned["subagent_id"]) == child_tokens
    assert (await upstream_calls(session)).get("write", 0) == writes_before


async def test_an_argument_predicate_is_enforced_by_the_gateway_with_the_subagent_as_principal(
    session: Any, llm: FakeLLMServer, home: str
) -> None:
    script = [
        [ToolCall("books__transfer", {"to": "x", "amount": 500})],
        [ToolCall("books__transfer", {"to": "x", "amount": 5})],
    ]
    llm.when("PRED-TASK", Behavior(tool_rounds=script, after_tools="paid: {tool_results}"))
    before = (await upstream_calls(session)).get("transfer", 0)
    condition = f'context.arguments.amount < 100 && principal.delegated_by == Agent::"{AGENT}"'
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {
            "task": "PRED-TASK: pay x",
            "tools": ["books__transfer"],
            "constraints": {"books__transfer": condition},
        },
    )
    assert spawned["success"] is True, spawned
    assert (await upstream_calls(session)).get("transfer", 0) == before + 1  # only the small one ran
    mine = [
        r["payload"] for r in of_subagent(chain(home), spawned["subagent_id"]) if r["kind"] == "gateway_call"
    ]
    assert [c["error_class"] for c in mine] == ["gateway_policy_forbidden", None]
    spawn = next(
        r for r in of_subagent(chain(home), spawned["subagent_id"]) if r["kind"] == "subagent_spawned"
    )
    (sha,) = spawn["payload"]["delegation"][-1]["predicates"]
    assert condition in spawn["payload"]["argument_predicates"][sha]


def export_chain(env: dict[str, str], directory: Path) -> list[dict[str, Any]]:
    """The store's chain signed (a checkpoint, as a serving baton writes them) and exported by the CLI,
    without its checkpoints (so only the links can tell)."""
    sign = "from baton.evidence.checkpoints import Checkpointer; from baton.runtime import Runtime; "
    sign += "runtime = Runtime.open(); Checkpointer(runtime).checkpoint(); runtime.close()"
    signed = subprocess.run(
        [sys.executable, "-c", sign], env=env, capture_output=True, text=True, timeout=300
    )
    assert signed.returncode == 0, signed.stderr
    done = subprocess.run(
        [sys.executable, "-m", "baton", "receipts", "export", str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (directory / "checkpoints.jsonl").unlink(missing_ok=True)
    return [json.loads(line) for line in (directory / "receipts.jsonl").read_text().splitlines()]


def verify(env: dict[str, str], directory: Path) -> subprocess.CompletedProcess[str]:
    """``python -m baton.chain_verify`` on the export, as its holder would run it."""
    public = directory / "checkpoint.pub"
    return subprocess.run(
        [sys.executable, "-m", "baton.chain_verify", str(directory), "--public-key", str(public)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


async def test_the_verifier_rejects_an_exported_chain_whose_delegation_widens(
    session: Any, llm: FakeLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    child = {"task": "WIDEN-CHILD: echo", "tools": ["books__echo"]}
    llm.when("WIDEN-PARENT", Behavior.calling("mcp_spawn_subagent", child, then="{tool_results}"))
    llm.when("WIDEN-CHILD", Behavior.calling("books__echo", {"text": "w"}, then="{tool_results}"))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "WIDEN-PARENT: delegate", "tools": ["books__echo", "mcp_spawn_subagent"], "read_only": True},
    )
    assert spawned["success"] is True, spawned
    directory = tmp_path / "export"
    rows = export_chain(env, directory)
    assert verify(env, directory).returncode == 0  # the chain as baton wrote it verifies

    def childs_chain(row: dict[str, Any]) -> list[dict[str, Any]] | None:
        carried = chain_of(row["payload"])
        deep = carried is not None and len(carried) == 3 and carried[1]["principal"] == spawned["subagent_id"]
        return carried if deep else None

    edited = [i for i, row in enumerate(rows) if childs_chain(row)]
    kinds = {rows[i]["kind"] for i in edited}
    assert {"subagent_spawned", "model_call", "gateway_call"} <= kinds, kinds
    for i in edited:  # the child claims, in every receipt of it, a tool and a write its parent never had
        link = childs_chain(rows[i])[-1]  # type: ignore[index]
        link["tools"] = [*link["tools"], "books__write"]
        link["read_only"] = False
        link["sha256"] = link_sha256(link)  # each link's hash recomputed ...
    prev = rows[edited[0]]["prev_sha256"]
    for row in rows[edited[0] :]:  # ... and every receipt's from there on: only the subset check can tell
        row["prev_sha256"] = prev
        row["sha256"] = prev = receipt_digest(row["seq"], row["kind"], row["at"], row["payload"], prev)
    (directory / "receipts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = verify(env, directory)
    assert done.returncode == 1, done.stdout
    assert f"receipt_delegation_widens: at seq {rows[edited[0]]['seq']}" in done.stderr, done.stderr
    assert "its tools are not a subset of its parent's" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_tool_whose_new_pinned_contract_drops_read_only_is_refused_to_a_read_only_subagent(
    session: Any, llm: FakeLLMServer, home: str, env: dict[str, str]
) -> None:
    """The spawn saw echo read-only; the version promoted since does not say so: the gateway checks the
    annotations of the version it serves, at the call."""
    llm.when("DRIFT-FIRST", Behavior(reply="ready"))
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "DRIFT-FIRST: wait", "tools": ["drift__echo"], "read_only": True},
    )
    assert spawned["success"] is True, spawned
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({**env, "BATON_NPM_REGISTRY": registry.url}))
        try:
            unmarked = [tool("echo", text="string"), DRIFT_TOOLS[1]]
            make_live(runtime, document("drift", publish(registry), unmarked), allowed=["echo", "calls"])
        finally:
            runtime.close()
    second = Behavior.calling("drift__echo", {"text": "now"}, then="{tool_results}")
    llm.rules.insert(0, ("DRIFT-SECOND", second))  # ahead of DRIFT-FIRST, which the history still holds
    answered = await call(
        session,
        "mcp_send_message_to_subagent",
        {"subagent_id": spawned["subagent_id"], "message": "DRIFT-SECOND: echo"},
    )
    assert answered["success"] is True, answered
    mine = [
        r["payload"] for r in of_subagent(chain(home), spawned["subagent_id"]) if r["kind"] == "gateway_call"
    ]
    assert [(c["tool"], c["error_class"]) for c in mine] == [("echo", "subagent_tool_not_allowed")]
    assert "echo" not in json.loads(
        (await call(session, "drift__calls"))["text"]
    )  # the upstream never ran it


@pytest.mark.parametrize(
    "constraints",
    [
        {"books__transfer": "true }; permit(principal, action, resource) when { true"},  # a policy of its own
        {"books__transfer": "context.arguments.amount <"},  # not a condition
        {"books__echo": "true"},  # not one of the spawn's tools
    ],
)
async def test_a_constraint_that_is_not_one_cedar_condition_on_a_spawned_tool_is_refused_at_spawn(
    session: Any, constraints: dict[str, str]
) -> None:
    before = (await call(session, "mcp_list_subagents"))["count"]
    refused = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "BAD-CONSTRAINT: pay", "tools": ["books__transfer"], "constraints": constraints},
    )
    assert refused["success"] is False and refused["error_class"] == "invalid_arguments", refused
    assert (await call(session, "mcp_list_subagents"))["count"] == before  # nothing stored


def test_the_agents_root_link_is_hashed_once_and_each_spawn_gets_its_own_copy() -> None:
    """The root is the same for every spawn of an agent; a spawn that changes its copy changes no other."""
    from baton.delegation import make_link
    from baton.subagents.delegating import root_link

    first, second = root_link("fan-out-agent"), root_link("fan-out-agent")
    assert first == second == make_link(None, principal="fan-out-agent")
    assert first is not second and first["predicates"] is not second["predicates"]
    first["predicates"].append("changed")
    first["tools"] = ["changed"]
    assert root_link("fan-out-agent") == make_link(None, principal="fan-out-agent")
    assert root_link("another-agent")["principal"] == "another-agent"
