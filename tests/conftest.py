"""Shared fixtures: a loopback model server, an isolated BATON_HOME and MCP clients over real transports."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton import clock
from baton.config import ENVIRONMENT_VARIABLES
from baton.testing import FakeLLMServer, ManualClock
from tests.needs import require

SRC = Path(__file__).resolve().parents[1] / "src"

#: Every variable baton reads, blanked so the developer's own environment never leaks into a test.
BLANKED = list(ENVIRONMENT_VARIABLES)

FAKE_MOONSHOT_KEY = "sk-test-moonshot-0123456789abcdef"
#: What every baton process a test starts is set to beyond its own home: a request that reached nobody
#: keeps its call waiting (most tests decide from the CLI or the store while a call waits, with no client
#: path); ``tests/hitl/test_reach.py`` removes it to test the default, which answers ``hitl_unreachable``.
SUITE_SETTINGS = {"BATON_HITL_UNREACHED": "wait"}


def isolated_environ() -> dict[str, str]:
    """The process environment without any baton setting of the developer's, plus :data:`SUITE_SETTINGS`."""
    return {**{k: v for k, v in os.environ.items() if k not in BLANKED}, **SUITE_SETTINGS}


def baton_environ(home: str | Path, **extra: str) -> dict[str, str]:
    """:func:`isolated_environ` for a baton process of this checkout (``src`` first) on ``home``; ``extra``
    on top."""
    environment = isolated_environ()
    environment.update(
        BATON_HOME=str(home), PYTHONPATH=str(SRC) + os.pathsep + environment.get("PYTHONPATH", ""), **extra
    )
    return environment


def subagent_environ(home: str, model_url: str, **extra: str) -> dict[str, str]:
    """:func:`baton_environ` for a ``baton serve`` whose subagents use the moonshot provider pointed at the
    loopback model server at ``model_url``; ``extra`` on top."""
    return baton_environ(
        home,
        COLLAB_PROVIDER="moonshot",
        OPENAI_MODEL="kimi-k3",
        MOONSHOT_API_KEY=FAKE_MOONSHOT_KEY,
        OPENAI_BASE_URL=model_url,
        **extra,
    )


@pytest.hookimpl(tryfirst=True)  # before the fixtures (module-scoped ones build whole gateways)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.needs(tool, ...)``: fail under CI, skip elsewhere, when a tool is missing."""
    for mark in item.iter_markers("needs"):
        require(*mark.args)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A real OpenAI-compatible server on 127.0.0.1."""
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def manual_clock() -> Iterator[ManualClock]:
    """Time stands still for this process's limits and expiries until the test calls ``advance``."""
    with clock.use(ManualClock()) as manual:
        yield manual


@pytest.fixture
def baton_env(tmp_path: Path) -> dict[str, str]:
    """An environment for a baton subprocess: its own BATON_HOME, nothing configured."""
    return baton_environ(tmp_path / "home")


@pytest.fixture
def model_env(baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path) -> dict[str, str]:
    """baton_env with the moonshot provider pointed at the loopback model server."""
    return {
        **baton_env,
        "COLLAB_PROVIDER": "moonshot",
        "OPENAI_MODEL": "kimi-k3",
        "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY,
        "OPENAI_BASE_URL": fake_llm.base_url,
        "COLLAB_LLM_RECEIPT_PATH": str(tmp_path / "llm_receipts.json"),
    }


def server_parameters(env: dict[str, str], *args: str) -> StdioServerParameters:
    """``python -m baton serve`` with ``env``."""
    return StdioServerParameters(command=sys.executable, args=["-m", "baton", "serve", *args], env=env)


@asynccontextmanager
async def stdio_session(env: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An initialized official MCP client session to a baton subprocess over stdio."""
    async with stdio_client(server_parameters(env)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


#: Each session's listed output schemas by the session's id (the session is kept, so its id is not reused;
#: an ``mcp.Client`` is not hashable). Built-in tools have one; proxied adapter tools may not.
_OUTPUT_SCHEMAS: dict[int, tuple[Any, dict[str, Any]]] = {}


async def output_schemas(session: Any) -> dict[str, Any]:
    """The ``outputSchema`` of every tool the session lists, by name (listed once per session)."""
    known = _OUTPUT_SCHEMAS.get(id(session))
    if known is None or known[0] is not session:
        listed = (await session.list_tools()).tools
        known = _OUTPUT_SCHEMAS[id(session)] = (session, {tool.name: tool.output_schema for tool in listed})
    return known[1]


async def call(session: Any, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool and return its structured result, checked against the tool's advertised ``outputSchema``
    (success and error alike), so every test calling through here also tests the schemas' promise."""
    schema = (await output_schemas(session)).get(tool)  # listed first: nothing runs between call and caller
    result = await session.call_tool(tool, arguments=arguments or {})
    assert isinstance(result.structured_content, dict), result
    if schema is not None:
        jsonschema.validate(result.structured_content, schema)
    return result.structured_content


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One throwaway PostgreSQL server on 127.0.0.1 for the session (CI must have one; elsewhere skip)."""
    from baton.testing.postgres import TemporaryPostgres

    require("postgresql")
    with TemporaryPostgres() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs once on SQLite and once on PostgreSQL (a fresh database each time)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'baton.db'}"
    server = request.getfixturevalue("postgres_server")
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(
        f"host=127.0.0.1 port={server.port} user=baton dbname=postgres", autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://baton@127.0.0.1:{server.port}/{name}"
