"""An adapter served unprefixed (``[serving] unprefixed = true``) through ``python -m baton serve``: its tools
answer under their own names with the upstream's answer, are receipted as any proxied call, and a name
that collides with a built-in tool or another adapter's tool is refused."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.config import load_settings
from baton.errors import GatewayError
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_gateway
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

TOOLS = [tool("echo", text="string"), tool("delete_everything")]
#: ``clash`` serves a tool named as a built-in one; ``twin`` one named as ``plain``'s.
CLASH_TOOLS = [tool("mcp_ping"), tool("test_simple_text")]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """``plain`` live and unprefixed (echo allowed, delete_everything denied); ``twin`` (echo) and ``clash``
    (mcp_ping) replayed, unprefixed, not promoted; ``fixture`` live and unprefixed with a tool named as a
    conformance fixture's, which a server with the fixtures on must refuse at start."""
    home = tmp_path_factory.mktemp("unprefixed") / "home"
    environment = baton_environ(home)
    with NpmRegistryServer() as registry, registry_runtime(home, registry) as runtime:
        tarball = publish(registry)
        make_live(runtime, document("plain", tarball, TOOLS), allowed=["echo"], unprefixed=True)
        fixture = document("fixture", tarball, [tool("test_simple_text")])
        make_live(runtime, fixture, allowed=["test_simple_text"], unprefixed=True)
        for adapter_id, tools, allowed in (
            ("twin", TOOLS, ["echo"]),
            ("clash", CLASH_TOOLS, ["mcp_ping"]),
        ):
            with pytest.raises(GatewayError) as refused:
                make_live(runtime, document(adapter_id, tarball, tools), allowed=allowed, unprefixed=True)
            assert refused.value.error_class == "adapter_tool_name_collision"
        environment["BATON_TEST_MCP_TOOLS"] = json.dumps(TOOLS)  # for the direct run of the upstream
        yield environment


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


async def direct_echo(env: dict[str, str], arguments: dict[str, Any]) -> Any:
    """The upstream's own answer: the test MCP server run directly, without baton."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "baton.testing.mcp_stdio_server"], env=env
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as upstream:
        await upstream.initialize()
        return await upstream.call_tool("echo", arguments)


def gateway_calls(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every ``gateway_call`` receipt in the store so far."""
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind="gateway_call", limit=10000)]
    finally:
        runtime.close()


async def test_an_unprefixed_tool_is_listed_under_its_own_name(session: Any) -> None:
    listed = {t.name for t in (await session.list_tools()).tools}
    assert "echo" in listed and "test_simple_text" in listed and "mcp_ping" in listed
    assert not {"plain__echo", "delete_everything", "plain__delete_everything"} & listed


async def test_an_unprefixed_call_answers_the_upstreams_answer_and_is_receipted(
    env: dict[str, str], session: Any
) -> None:
    arguments = {"text": "transparent"}
    proxied = await session.call_tool("echo", arguments)
    direct = await direct_echo(env, arguments)
    assert not proxied.is_error and not direct.is_error
    assert [c.model_dump() for c in proxied.content] == [c.model_dump() for c in direct.content]
    assert proxied.structured_content["adapter_id"] == "plain"
    receipts = [c for c in gateway_calls(env) if c["adapter_id"] == "plain" and c["tool"] == "echo"]
    assert receipts and receipts[-1]["success"] and receipts[-1]["agent"] == "stdio:mcp"


async def test_a_denied_tool_is_denied_under_its_own_name_too(env: dict[str, str], session: Any) -> None:
    assert (await call(session, "delete_everything"))["error_class"] == "tool_denied"
    denied = [c for c in gateway_calls(env) if c["tool"] == "delete_everything"]
    assert denied and denied[-1]["error_class"] == "tool_denied"


async def test_the_built_in_tool_keeps_its_name(session: Any) -> None:
    assert (await call(session, "mcp_ping"))["success"]


def test_promotion_and_the_names_command_refuse_a_name_a_built_in_or_a_live_adapter_serves(
    env: dict[str, str],
) -> None:
    for adapter_id, named in (("clash", "the built-in tool mcp_ping"), ("twin", "adapter plain's tool echo")):
        done = run_gateway(env, "promote", adapter_id)
        assert done.returncode == 1
        assert "adapter_tool_name_collision" in done.stderr and named in done.stderr, done.stderr
    # the names command, after promotion's refusals: serving twin prefixed changes its policy, after which
    # promote would refuse it for needing a replay instead (one test, so no test order can swap the two)
    refused = run_gateway(env, "names", "twin", "--unprefixed")
    assert refused.returncode == 1 and "adapter plain's tool echo" in refused.stderr
    done = run_gateway(env, "names", "twin", "--prefixed", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tools"] == ["twin__echo"]


async def test_a_server_that_finds_a_collision_at_start_serves_neither_name(env: dict[str, str]) -> None:
    async with stdio_session({**env, "BATON_CONFORMANCE_FIXTURES": "1"}) as client:
        answer = await client.call_tool("test_simple_text", {})
        assert "adapter_id" not in (answer.structured_content or {})  # the fixture's own tool answered
        adapters = {a["adapter_id"]: a for a in (await call(client, "mcp_list_adapters"))["adapters"]}
        assert adapters["fixture"]["block_error_class"] == "adapter_tool_name_collision"
        assert "fixture__test_simple_text" not in {t.name for t in (await client.list_tools()).tools}
        refused = await call(client, "fixture__test_simple_text")
        assert refused["error_class"] == "adapter_tool_name_collision"
