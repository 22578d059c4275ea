"""Standing grants through a real ``python -m baton serve`` (stdio, the official MCP client) and real
``baton hitl`` processes: a person approves one transfer and grants the agent more of them, within a
condition, a use count and an expiry; covered calls run without asking and their receipts name the grant;
an uncovered, used-up, revoked or expired grant asks a person again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

TOOLS = [tool("transfer", to="string", amount="integer"), tool("calls")]
TO_BOB = 'context.arguments.to == "bob"'


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A store with the ``db`` adapter live; ``transfer`` needs a person's approval."""
    home = tmp_path_factory.mktemp("grants") / "home"
    environment = baton_environ(home, HITL_TIMEOUT_SECONDS="3600")
    with NpmRegistryServer() as registry:
        with registry_runtime(home, registry) as runtime:
            make_live(
                runtime,
                document("db", publish(registry), TOOLS),
                allowed=["transfer", "calls"],
                approval_required=["transfer"],
            )
        yield environment


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


def hitl(env: dict[str, str], *args: str) -> Any:
    """``baton hitl ARGS`` as this OS account; its JSON output parsed (it must succeed)."""
    done = run_cli(env, "hitl", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def receipts(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind=kind)]
    finally:
        runtime.close()


async def pending_request(session: Any) -> str:
    """The id of the one pending request (a transfer waiting for a person)."""
    with anyio.fail_after(300):  # only stops a hang
        while not (listed := (await call(session, "mcp_list_pending_requests"))["requests"]):
            await anyio.sleep(0.05)
    return str(listed[0]["request_id"])


async def transfer(session: Any, env: dict[str, str], to: str, *decide: str) -> dict[str, Any]:
    """One transfer; when it asks a person, ``baton hitl DECIDE… ID`` decides it (none given: it must not ask)."""
    result: dict[str, Any] = {}

    async def run() -> None:
        result.update(await call(session, "db__transfer", {"to": to, "amount": 5}))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        if decide:
            request_id = await pending_request(session)
            await anyio.to_thread.run_sync(lambda: run_cli(env, "hitl", decide[0], request_id, *decide[1:]))
    return result


async def test_a_grant_covers_matching_calls_until_its_uses_run_out(
    session: Any, env: dict[str, str]
) -> None:
    first = await transfer(session, env, "bob", "approve", "--for", "1h", "--uses", "2", "--when", TO_BOB)
    (grant,) = hitl(env, "grants", "--json")
    covered = [await transfer(session, env, "bob") for _ in range(2)]
    elsewhere = await transfer(session, env, "eve", "reject")
    used_up = await transfer(session, env, "bob", "reject")
    assert first["success"] is True and "request_id" in first["approval"]
    assert (grant["agent"], grant["tool"], grant["condition"], grant["max_uses"]) == (
        "stdio:mcp",
        "transfer",
        TO_BOB,
        2,
    )
    assert [c["success"] for c in covered] == [True, True]
    assert [c["approval"]["grant_id"] for c in covered] == [grant["grant_id"]] * 2
    assert [c["approval"]["grant_use"] for c in covered] == [1, 2]
    assert elsewhere["error_class"] == used_up["error_class"] == "approval_denied"
    calls = [r for r in receipts(env, "gateway_call") if r["tool"] == "transfer"]
    assert [(r.get("approval") or {}).get("grant_id") for r in calls[-4:-2]] == [grant["grant_id"]] * 2
    (created,) = [r for r in receipts(env, "hitl_grant_created") if r["grant_id"] == grant["grant_id"]]
    assert (
        created["request_id"] == first["approval"]["request_id"]
        and created["policy_sha256"] == grant["policy_sha256"]
    )
    assert hitl(env, "grants", "--all", "--json")[0]["status"] == "used_up"


async def test_a_revoked_grant_covers_nothing_more(session: Any, env: dict[str, str]) -> None:
    await transfer(session, env, "carol", "approve", "--for", "1h")
    (grant,) = hitl(env, "grants", "--json")
    revoked = hitl(env, "grants", "revoke", grant["grant_id"])
    asked = await transfer(session, env, "carol", "reject")
    assert revoked["status"] == "revoked" and revoked["revoked_by"]
    assert asked["error_class"] == "approval_denied"
    assert grant["grant_id"] in [r["grant_id"] for r in receipts(env, "hitl_grant_revoked")]
    again = run_cli(env, "hitl", "grants", "revoke", grant["grant_id"])
    assert again.returncode == 1 and "already revoked" in again.stderr


async def test_an_expired_grant_covers_nothing_more(session: Any, env: dict[str, str]) -> None:
    await transfer(session, env, "dave", "approve", "--for", "1s")
    with anyio.fail_after(300):  # waits for the second to pass, whatever the machine's load
        while (listed := hitl(env, "grants", "--all", "--json"))[0]["status"] != "expired":
            await anyio.sleep(0.2)
    asked = await transfer(session, env, "dave", "reject")
    assert asked["error_class"] == "approval_denied" and listed[0]["uses"] == 0


async def test_a_grant_that_cannot_be_made_refuses_before_anything_is_approved(
    session: Any, env: dict[str, str]
) -> None:
    outcome: dict[str, Any] = {}

    async def run() -> None:
        outcome.update(await call(session, "db__transfer", {"to": "frank", "amount": 5}))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        request_id = await pending_request(session)
        smuggled = run_cli(
            env,
            "hitl",
            "approve",
            request_id,
            "--for",
            "1h",
            "--when",
            "true }; permit(principal, action, resource) when { true",
        )
        forever = run_cli(env, "hitl", "approve", request_id, "--for", "48h")
        still = hitl(env, "show", request_id, "--json")
        await anyio.to_thread.run_sync(lambda: run_cli(env, "hitl", "reject", request_id))
    assert smuggled.returncode == forever.returncode == 1
    assert "invalid_arguments" in smuggled.stderr and "invalid_arguments" in forever.stderr
    assert still["status"] == "pending" and outcome["error_class"] == "approval_denied"
