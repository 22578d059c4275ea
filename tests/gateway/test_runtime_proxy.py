"""Promoted adapters through ``python -m baton serve``: deny by default, approvals, drift, crashes."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.config import load_settings
from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy.bookkeeping import list_view
from baton.gateway.sandbox.stderr import STDERR_CAP_BYTES
from baton.gateway.serving.promotion import demote, promote
from baton.runtime import Runtime
from baton.testing import FakeLLMServer
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import FAKE_MOONSHOT_KEY, baton_environ, call, stdio_session

BREAKERS = Path(__file__).parents[1] / "campaign_breakers.py"

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.needs("bwrap"),
]

TOOLS = [
    tool("echo", text="string"),
    tool("transfer", to="string", amount="integer"),
    tool("crash"),
    tool("slow", seconds="number"),
    tool("cancellations"),
    tool("calls"),
    tool("hang"),
    tool("whoami"),
    tool("flood", megabytes="integer"),
    tool("delete_everything"),
]
#: The ``brief`` adapter's tools: a call that hangs past its 2 s call timeout, an approval nobody decides.
BRIEF_TOOLS = [
    tool("echo", text="string"),
    tool("transfer", to="string", amount="integer"),
    tool("hang"),
    tool("calls"),
]
#: What an approval of the test's transfer is bound to.
TRANSFER_SHA256 = sha256_hex(canonical_json({"to": "bob", "amount": 5}))


#: Adapters whose upstream drifts at run time in one way each (the drifty adapter's is the tool list).
DRIFTS = {"defdrift": "proxy_drift_definition", "initdrift": "proxy_drift_initialize"}


@pytest.fixture(scope="module")
def shared() -> Iterator[dict[str, Path]]:
    """Host directories for the ``files`` adapter: ``ro`` with a file in it, ``rw`` that uid 65534 owns."""
    base = Path(tempfile.mkdtemp(prefix="baton-shared-"))
    paths = {"base": base, "ro": base / "ro", "rw": base / "rw", "outside": base / "outside.txt"}
    for name in ("ro", "rw"):
        paths[name].mkdir()
    for directory in (base, paths["ro"], paths["rw"]):
        directory.chmod(0o755)
    (paths["ro"] / "notes.txt").write_text("created on the host")
    (paths["ro"] / "notes.txt").chmod(0o644)
    paths["outside"].write_text("not mounted")
    paths["outside"].chmod(0o644)
    if os.geteuid() == 0:
        os.chown(paths["rw"], 65534, 65534)
    yield paths
    shutil.rmtree(base)


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, pages: dict[str, str], shared: dict[str, Path]
) -> Iterator[dict[str, str]]:
    """Live adapters: ``demo`` (the test server), ``net`` (egress allowlist), ``files`` (a read-only and a
    read-write host mount) and three that drift at run time (their upstream answers differently once it
    runs behind baton's egress proxy): ``drifty`` (one more tool), ``defdrift`` (a changed description)
    and ``initdrift`` (another server version)."""
    home = tmp_path_factory.mktemp("runtime") / "home"
    environment = baton_environ(
        home,
        HITL_TIMEOUT_SECONDS="3600",
        BATON_HITL_PROGRESS_SECONDS="1",
        BATON_HITL_ALLOW_MCP_DECISIONS="1",  # the tests play the operator through MCP
    )
    with NpmRegistryServer() as registry, registry_runtime(home, registry) as runtime:
        tarball = publish(registry)
        make_live(
            runtime,
            document("demo", tarball, TOOLS, call_timeout_seconds=3600),
            allowed=[
                "echo",
                "transfer",
                "crash",
                "slow",
                "cancellations",
                "calls",
                "whoami",
                "flood",
            ],
            approval_required=["transfer"],
            record_arguments=True,
            approval_timeout_seconds=3600,  # every test decides (or rejects) its approval itself
        )
        # the one adapter whose waits are short, because its tests check what their expiry does
        make_live(
            runtime,
            document("brief", tarball, BRIEF_TOOLS, call_timeout_seconds=2),
            allowed=["echo", "transfer", "hang", "calls"],
            approval_required=["transfer"],
            approval_timeout_seconds=1,
        )
        drifty = document(
            "drifty",
            tarball,
            [tool("echo", text="string")],
            env={"BATON_TEST_MCP_MODE": "proxy_drift"},
            network="allowlist",
            allowed_origins=["http://127.0.0.1:9"],
        )
        make_live(runtime, drifty, allowed=["echo"])
        for adapter_id, mode in DRIFTS.items():
            drifted = document(
                adapter_id,
                tarball,
                [tool("echo", text="string")],
                env={"BATON_TEST_MCP_MODE": mode},
                network="allowlist",
                allowed_origins=["http://127.0.0.1:9"],
            )
            make_live(runtime, drifted, allowed=["echo"])
        net = document(
            "net",
            tarball,
            [tool("fetch", url="string")],
            network="allowlist",
            allowed_origins=[pages["allowed"]],
        )
        make_live(runtime, net, allowed=["fetch"])
        files = document(
            "files",
            tarball,
            [tool("read", path="string"), tool("write", path="string", text="string")],
            mounts=[
                {"host": str(shared["ro"]), "sandbox": "/data", "mode": "ro"},
                {"host": str(shared["rw"]), "sandbox": "/state", "mode": "rw"},
            ],
        )
        # the mount refuses the write; the test calls it directly, so no approval in between
        make_live(runtime, files, allowed=["read", "write"], allow_destructive_without_approval=["write"])
        environment["TEST_SHARED_DIR"] = str(shared["base"])
        yield environment


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


async def test_allowed_tools_are_listed_with_the_upstream_schema_and_denied_ones_are_not(
    session: Any,
) -> None:
    listed = {t.name: t for t in (await session.list_tools()).tools}
    assert {"demo__echo", "demo__transfer", "demo__crash", "drifty__echo"} <= set(listed)
    assert "demo__delete_everything" not in listed
    assert listed["demo__echo"].input_schema == TOOLS[0]["inputSchema"]


async def test_an_allowed_tool_is_proxied_with_progress(session: Any) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    result = await session.call_tool("demo__echo", {"text": "hi"}, progress_callback=progress)
    assert not result.is_error and result.content[0].text == "hi"
    assert result.structured_content["adapter_id"] == "demo" and seen
    assert result.structured_content["tool"] == "echo"


async def test_a_denied_tool_cannot_be_called_even_by_name(session: Any) -> None:
    result = await call(session, "demo__delete_everything")
    assert result["error_class"] == "tool_denied"
    assert (await call(session, "demo__not_a_tool"))["error_class"] == "tool_denied"


async def _asked(session: Any, results: dict[str, Any]) -> dict[str, Any]:
    """The approval request the gated call made, once it is pending; ``results`` gets the call's result, so
    a call that ends without asking fails the test at once."""
    with anyio.fail_after(300):
        while not (pending := (await call(session, "mcp_list_pending_requests"))["requests"]):
            if "call" in results:
                pytest.fail(f"the gated call ended without asking for an approval: {results['call']}")
            await anyio.sleep(0.05)
    return dict(pending[0])


async def _decide(
    session: Any, approved: bool, results: dict[str, Any], admin_notes: str | None = None
) -> dict[str, Any]:
    """Wait for the pending approval, check what it shows, decide it through mcp_respond_to_request."""
    request = await _asked(session, results)
    assert request["agent"] == "stdio:mcp"  # the approval is bound to the agent that made the gated call
    assert request["context"]["arguments"] == {"amount": 5, "to": "bob"}
    assert request["context"]["arguments_sha256"] == TRANSFER_SHA256
    decision = {"request_id": request["request_id"], "approved": approved, "admin_notes": admin_notes}
    await call(session, "mcp_respond_to_request", decision)
    return request


async def decided_transfer(
    session: Any, approved: bool, admin_notes: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gated ``demo__transfer`` of bob's 5, decided ``approved`` through MCP: (its result, the request)."""
    results: dict[str, Any] = {}

    async def transfer() -> None:
        results["call"] = await call(session, "demo__transfer", {"to": "bob", "amount": 5})

    async with anyio.create_task_group() as group:
        group.start_soon(transfer)
        request = await _decide(session, approved, results, admin_notes)
    return results["call"], request


async def test_an_approval_gated_call_waits_for_the_human_and_sends_exactly_the_approved_arguments(
    session: Any,
) -> None:
    result, request = await decided_transfer(session, True)
    assert result["success"] and result["text"] == 'transferred {"amount": 5, "to": "bob"}'
    assert result["approval"]["request_id"] == request["request_id"]
    assert result["approval"]["decision_receipt_seq"] is not None
    assert result["approval"]["arguments_sha256"] == TRANSFER_SHA256


async def transfers(session: Any, adapter: str = "demo") -> int:
    """How many transfer calls the adapter's (current) upstream process has received."""
    return int(json.loads((await call(session, f"{adapter}__calls"))["text"]).get("transfer", 0))


async def test_a_rejected_approval_never_reaches_the_upstream(session: Any) -> None:
    before = await transfers(session)
    refused, request = await decided_transfer(session, False, admin_notes="not this week")
    assert refused["error_class"] == "approval_denied"
    assert refused["approval"]["request_id"] == request["request_id"]  # which decision refused it
    assert refused["admin_notes"] == "not this week"  # the person's rejection, not the re-check's refusal
    assert "rejected" in refused["error"] and "failed_checks" not in refused
    assert await transfers(session) == before


async def test_a_rejection_passed_on_as_an_approval_is_refused_by_the_recheck_before_the_upstream(
    env: dict[str, str], session: Any
) -> None:
    """``approve`` broken on purpose (``tests/campaign_breakers.py``) hands the rejection on as an
    approval; the stored decision, re-read just before the upstream call, still refuses it."""
    params = StdioServerParameters(
        command=sys.executable, args=[str(BREAKERS), "rejection_as_approval"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as broken:
        await broken.initialize()
        before = await transfers(broken)
        refused, request = await decided_transfer(broken, False)
        assert refused["error_class"] == "approval_denied"
        assert refused["request_id"] == request["request_id"]
        assert refused["failed_checks"] == ["approved"]
        assert await transfers(broken) == before


async def test_an_approval_nobody_decides_times_out_without_calling_upstream(session: Any) -> None:
    """``brief`` gives its approvals 1 s: the expiry is what is tested, so the test waits for its result."""
    before = await transfers(session, "brief")
    with anyio.fail_after(300):
        result = await call(session, "brief__transfer", {"to": "eve", "amount": 1})
    assert result["error_class"] == "hitl_timeout"
    assert await transfers(session, "brief") == before


async def test_the_agent_cannot_approve_its_own_gated_call_by_default(
    env: dict[str, str], session: Any
) -> None:
    """The agent's own approval is refused; the operator's session then rejects, which ends the call."""
    agent_env = {k: v for k, v in env.items() if k != "BATON_HITL_ALLOW_MCP_DECISIONS"}
    async with stdio_session(agent_env) as agent:
        before = await transfers(agent)
        results: dict[str, Any] = {}

        async def transfer() -> None:
            results["call"] = await call(agent, "demo__transfer", {"to": "mallory", "amount": 9})

        async with anyio.create_task_group() as group:
            group.start_soon(transfer)
            request_id = (await _asked(agent, results))["request_id"]
            refused = await call(
                agent, "mcp_respond_to_request", {"request_id": request_id, "approved": True}
            )
            assert refused["error_class"] == "hitl_decider_not_authorized"
            assert (await call(agent, "mcp_get_request_status", {"request_id": request_id}))[
                "status"
            ] == "pending"
            await call(session, "mcp_respond_to_request", {"request_id": request_id, "approved": False})
        assert results["call"]["error_class"] == "approval_denied"
        assert await transfers(agent) == before


async def test_an_elicitation_accept_never_approves_the_agents_own_gated_call(
    env: dict[str, str], session: Any
) -> None:
    """With elicitation on, a 2025-11-25 client that would accept anything is never asked to approve its
    own gated call; the transfer waits for the operator's session, which rejects it here."""
    import mcp_types as types

    agent_env = {k: v for k, v in env.items() if k != "BATON_HITL_ALLOW_MCP_DECISIONS"}
    agent_env["BATON_HITL_ELICITATION"] = "true"
    asked: list[Any] = []

    async def approve_everything(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approved": True})

    async with (
        stdio_client(
            StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve"], env=agent_env)
        ) as (read, write),
        ClientSession(read, write, elicitation_callback=approve_everything) as agent,
    ):
        await agent.initialize()
        before = await transfers(agent)
        results: dict[str, Any] = {}

        async def transfer() -> None:
            results["call"] = await call(agent, "demo__transfer", {"to": "trent", "amount": 7})

        async with anyio.create_task_group() as group:
            group.start_soon(transfer)
            request_id = (await _asked(agent, results))["request_id"]
            await call(session, "mcp_respond_to_request", {"request_id": request_id, "approved": False})
        assert results["call"]["error_class"] == "approval_denied"
        assert await transfers(agent) == before
    assert asked == []


async def test_an_upstream_crash_mid_call_is_an_error_and_the_next_call_works(session: Any) -> None:
    assert (await call(session, "demo__crash"))["error_class"] == "mcp_upstream_failed"
    with anyio.fail_after(300):
        result = await call(session, "demo__echo", {"text": "again"})
    assert result["success"] and result["text"] == "again"


async def test_a_hung_call_times_out_restarts_the_upstream_and_the_next_call_works(session: Any) -> None:
    """``brief``'s 2 s call timeout is what is tested: the test waits for its result, never for a time."""
    before = {a["adapter_id"]: a for a in (await call(session, "mcp_list_adapters"))["adapters"]}["brief"]
    assert (await call(session, "brief__echo", {"text": "warm"}))["success"]
    with anyio.fail_after(300):
        assert (await call(session, "brief__hang"))["error_class"] == "mcp_upstream_timeout"
        result = await call(session, "brief__echo", {"text": "after the hang"})
    assert result["success"] and result["text"] == "after the hang"
    after = {a["adapter_id"]: a for a in (await call(session, "mcp_list_adapters"))["adapters"]}["brief"]
    assert after["upstream_restarts"] == before["upstream_restarts"] + 1
    assert after["upstream_starts"] >= before["upstream_starts"] + 1
    assert json.loads((await call(session, "brief__calls"))["text"]).get("hang") is None  # a new process


async def test_a_cancelled_call_reaches_the_upstream(session: Any) -> None:
    before = int((await call(session, "demo__cancellations"))["text"])
    slow_before = json.loads((await call(session, "demo__calls"))["text"]).get("slow", 0)
    async with anyio.create_task_group() as group:
        group.start_soon(session.call_tool, "demo__slow", {"seconds": 3600})
        with anyio.fail_after(300):  # cancel once the upstream has the call, not after a guessed delay
            while json.loads((await call(session, "demo__calls"))["text"]).get("slow", 0) == slow_before:
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    with anyio.fail_after(300):
        while int((await call(session, "demo__cancellations"))["text"]) != before + 1:
            await anyio.sleep(0.1)


async def test_a_stderr_flood_at_run_time_keeps_only_the_last_mib_on_disk(
    session: Any, env: dict[str, str]
) -> None:
    assert (await call(session, "demo__flood", {"megabytes": 100}))["text"] == "flooded"
    log = Path(env["BATON_HOME"]) / "gateway" / "demo" / "upstream-stderr.log"
    with anyio.fail_after(300):
        while not log.read_bytes().endswith(b"END OF FLOOD\n"):
            await anyio.sleep(0.05)
    data = log.read_bytes()
    assert len(data) <= 2 * STDERR_CAP_BYTES + 200
    assert b"earlier bytes of stderr were cut" in data


async def test_a_mounted_host_directory_is_readable_and_read_only_and_nothing_else_is(
    session: Any, shared: dict[str, Path]
) -> None:
    assert (await call(session, "files__read", {"path": "/data/notes.txt"}))["text"] == "created on the host"
    refused = await call(session, "files__write", {"path": "/data/new.txt", "text": "x"})
    assert refused["error_class"] == "mcp_upstream_tool_error" and "OSError" in refused["error"]
    assert not (shared["ro"] / "new.txt").exists()
    outside = await call(session, "files__read", {"path": str(shared["outside"])})
    assert outside["error_class"] == "mcp_upstream_tool_error" and "FileNotFoundError" in outside["error"]
    assert (await call(session, "files__write", {"path": "/state/saved.json", "text": "{}"}))[
        "text"
    ] == "written"
    assert (shared["rw"] / "saved.json").read_text() == "{}"


async def test_the_runtime_client_is_the_replay_client(session: Any) -> None:
    from baton.gateway.policy.policy import ClientSpec
    from baton.gateway.replay.protocol import initialize_params

    seen = json.loads((await call(session, "demo__whoami"))["text"])
    assert seen == initialize_params(ClientSpec())


@pytest.mark.parametrize(
    ("adapter_id", "error_class"),
    [
        ("drifty", "mcp_tool_contract_mismatch"),
        ("defdrift", "mcp_tool_definition_mismatch"),
        ("initdrift", "mcp_initialize_contract_mismatch"),
    ],
)
async def test_drift_at_the_upstream_start_blocks_the_adapter_for_good(
    env: dict[str, str], session: Any, adapter_id: str, error_class: str
) -> None:
    """Tool list, definition and initialize drift each block at run time (tool poisoning never runs)."""
    first = await call(session, f"{adapter_id}__echo", {"text": "x"})
    assert first["error_class"] == error_class
    adapters = {a["adapter_id"]: a for a in (await call(session, "mcp_list_adapters"))["adapters"]}
    assert adapters[adapter_id]["state"] == "blocked", adapters[adapter_id]
    assert adapters[adapter_id]["block_reason"]
    assert adapters[adapter_id]["block_error_class"] == error_class
    assert (await call(session, f"{adapter_id}__echo", {"text": "x"}))["error_class"] in (
        error_class,
        "adapter_not_promoted",
    )
    runtime = Runtime.open(load_settings(env))
    try:  # the block is in the store, so every other server process refuses the adapter too
        rows = {row["adapter_id"]: row for row in list_view(runtime)}
        assert rows[adapter_id]["state"] == "blocked"
        assert rows["demo"]["state"] == "promoted"
    finally:
        runtime.close()
    demo = adapters["demo"]
    assert demo["state"] == "promoted" and demo["contract"]["server_name"] == "baton-test-mcp"
    assert demo["tool_count"] == len(TOOLS)


async def test_a_blocked_adapters_tools_are_never_offered_to_a_subagent(
    env: dict[str, str], session: Any, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """The block is in the store: another server process loads the adapter blocked and never gives a
    subagent its tools, while a live adapter's tools stay on offer."""
    first = await call(session, "drifty__echo", {"text": "x"})  # blocks it, unless an earlier test did
    assert first["error_class"] in ("mcp_tool_contract_mismatch", "adapter_not_promoted"), first
    with_model = {
        **env,
        "COLLAB_PROVIDER": "moonshot",
        "OPENAI_MODEL": "kimi-k3",
        "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY,
        "OPENAI_BASE_URL": fake_llm.base_url,
        "COLLAB_LLM_RECEIPT_PATH": str(tmp_path / "llm_receipts.json"),
    }
    async with stdio_session(with_model) as other:
        assert (await call(other, "demo__echo", {"text": "loads the adapters"}))["success"]
        refused = await call(
            other, "mcp_spawn_subagent", {"task": "use them", "tools": ["demo__echo", "drifty__echo"]}
        )
    assert refused.get("error_class") == "subagent_tool_not_allowed", refused
    assert refused["refused"] == ["drifty__echo"]
    assert "demo__echo" in refused["permitted"] and "drifty__echo" not in refused["permitted"]
    assert not fake_llm.requests


def gateway_calls(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every ``gateway_call`` receipt in the store so far."""
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind="gateway_call", limit=10000)]
    finally:
        runtime.close()


async def test_every_proxied_call_is_a_receipt(env: dict[str, str], session: Any) -> None:
    await call(session, "demo__echo", {"text": "receipt"})
    assert (await call(session, "demo__delete_everything"))["error_class"] == "tool_denied"
    await decided_transfer(session, True)
    calls = gateway_calls(env)
    echo = [c for c in calls if c["tool"] == "echo" and c.get("arguments") == {"text": "receipt"}]
    assert echo and echo[-1]["success"] and echo[-1]["duration_seconds"] >= 0
    transfers = [c for c in calls if c["tool"] == "transfer" and c["success"]]
    assert transfers[-1]["approval"]["decision_receipt_sha256"]
    assert transfers[-1]["arguments"] == {"amount": 5, "to": "bob"}
    assert transfers[-1]["arguments_sha256"] == TRANSFER_SHA256
    assert transfers[-1]["agent"] == echo[-1]["agent"] == "stdio:mcp"  # the stdio client's claim
    assert any(c["error_class"] == "tool_denied" and c["tool"] == "delete_everything" for c in calls)


async def test_arguments_are_not_recorded_unless_the_policy_says_so(
    env: dict[str, str], session: Any, pages: dict[str, str]
) -> None:
    """``net`` keeps the default record_arguments = false: its receipts hold a digest, never the arguments."""
    url = pages["allowed"] + "/?token=kept-out-of-receipts"
    assert (await call(session, "net__fetch", {"url": url}))["text"].startswith("200 ")
    net = [c for c in gateway_calls(env) if c["adapter_id"] == "net"]
    assert net and all("arguments" not in c and c["arguments_sha256"] for c in net), net
    assert all("kept-out-of-receipts" not in json.dumps(c) for c in net)


async def test_a_demoted_adapter_stops_answering_at_once(env: dict[str, str], session: Any) -> None:
    # the server loads its adapters on first use: make sure this one was live when it did
    assert (await call(session, "demo__echo", {"text": "before"}))["success"]
    runtime = Runtime.open(load_settings(env))
    try:
        demote(runtime, "demo")
        try:
            assert (await call(session, "demo__echo", {"text": "x"}))["error_class"] == "adapter_not_promoted"
            assert "demo__echo" not in {t.name for t in (await session.list_tools()).tools}
        finally:  # the other tests of this module need demo live, whatever happened here
            promote(runtime, "demo")
        assert (await call(session, "demo__echo", {"text": "x"}))["success"]
    finally:
        runtime.close()


def test_promotion_needs_a_replay_under_the_current_policy(env: dict[str, str]) -> None:
    runtime = Runtime.open(load_settings(env))
    try:
        path = Path(env["BATON_HOME"]) / "adapters" / "demo.toml"
        original = path.read_text()
        path.write_text(original.replace("record_arguments = true", "record_arguments = false"))
        try:
            with pytest.raises(GatewayError) as refused:
                promote(runtime, "demo")
        finally:
            path.write_text(original)
        assert refused.value.error_class == "adapter_promotion_refused"
        assert promote(runtime, "demo")["state"] == "promoted"
        assert demote(runtime, "demo")["state"] == "replayed"
        assert promote(runtime, "demo")["state"] == "promoted"
        rows = {row["adapter_id"]: row for row in list_view(runtime)}
        assert rows["demo"]["state"] == "promoted"
        assert json.loads(json.dumps(runtime.receipts.list(kind="gateway_demote")[0].payload))
    finally:
        runtime.close()


async def test_egress_reaches_only_the_allowed_origin_through_batons_proxy(
    session: Any, pages: dict[str, str]
) -> None:
    allowed = await call(session, "net__fetch", {"url": pages["allowed"] + "/"})
    assert allowed["text"].startswith("200 ") and "Hello allowed-page" in allowed["text"]
    refused = await call(session, "net__fetch", {"url": pages["other"] + "/"})
    assert refused["text"] == "403 refused"
    tunnel = await call(session, "net__fetch", {"url": pages["other"].replace("http:", "https:") + "/"})
    assert tunnel["text"].startswith("error") and "403" in tunnel["text"]
