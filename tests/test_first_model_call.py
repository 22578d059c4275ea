"""The first model call of a fresh server (issue 49 item 5): the model stack is built off the event loop, and
its warm-up starts once the start-up's answers are written (bench/first_model_call.py times it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton.config import load_settings
from baton.models.client import ChatTurn, ModelClient
from baton.models.pydantic_ai_imports import load_pydantic_ai
from baton.testing import FakeLLMServer
from baton.wire import server
from baton.wire.server import RegistryLoader
from tests.conftest import call, stdio_session
from tests.test_subagents_runner import make_runtime

pytestmark = pytest.mark.anyio

#: How long the test's stand-in for the warm-up holds the build lock when the loop never runs: a hang
#: guard for the old behaviour, never reached when the call leaves the loop free.
HANG_GUARD_SECONDS = 30.0


@pytest.fixture
def loader(tmp_path: Path) -> Iterator[RegistryLoader]:
    """A stdio server's registry loader on its own home (its runtime closed afterwards)."""
    made = RegistryLoader(load_settings({"BATON_HOME": str(tmp_path / "home")}))
    yield made
    if made.registry is not None:
        made.registry.runtime.close()


async def test_a_registry_loaded_for_a_waiting_request_is_answered_once_that_answer_is_written(
    loader: RegistryLoader,
) -> None:
    loader.wanted.set()  # a request that needs the registry (no cached tools/list) waits on it
    registry = await loader.load()
    assert registry is not None
    assert not registry.start_up_answered.is_set()  # its answer is not out yet: the warm-up waits
    loader.written()
    assert registry.start_up_answered.is_set()


async def test_a_registry_loaded_after_the_cached_listing_was_written_is_answered_at_once(
    loader: RegistryLoader,
) -> None:
    loader.listed_from_cache()
    loader.written()  # the cached tools/list answer is out: loading starts
    registry = await loader.load()
    assert registry is not None and registry.start_up_answered.is_set()


async def test_a_call_waiting_for_the_model_build_leaves_the_event_loop_free(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    runtime = make_runtime(tmp_path, fake_llm)
    client = ModelClient(runtime.settings, runtime.receipts, runtime.redactor)
    load_pydantic_ai()  # so the call's first step goes straight to the model
    held, loop_ran = threading.Event(), threading.Event()
    loop_ran_while_held: list[bool] = []

    def build_elsewhere() -> None:
        """Stands for the warm-up's worker in the middle of building the model."""
        with client._model_lock:
            held.set()
            loop_ran_while_held.append(loop_ran.wait(HANG_GUARD_SECONDS))

    worker = threading.Thread(target=build_elsewhere)
    worker.start()
    try:
        await anyio.to_thread.run_sync(held.wait)
        call = asyncio.create_task(
            client.complete("system", [ChatTurn("user", "hi")], purpose="subagent_turn", subagent_id=None)
        )
        asyncio.get_running_loop().call_soon(loop_ran.set)  # runs only if the call's first step yields
        reply = await call
        assert reply.text
    finally:
        loop_ran.set()
        await anyio.to_thread.run_sync(worker.join)
        await client.aclose()
        runtime.close()
    assert loop_ran_while_held == [True]


#: Imports the model stack as the warm-up (or a first spawn) does, and reports what the collector did.
STACK_PROBE = """
import gc, json
from baton.config import Settings
from baton.models.providers import ProviderConfig, build_model
collections = lambda: sum(generation["collections"] for generation in gc.get_stats())
before = collections()
build_model(ProviderConfig("moonshot", "kimi-k3", "http://127.0.0.1:9/v1", "sk-probe"), Settings())
print(json.dumps({"collections": collections() - before, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_the_model_stack_is_imported_with_the_collector_paused_then_frozen(
    baton_env: dict[str, str],
) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", STACK_PROBE], env=baton_env, capture_output=True, text=True, check=True
    )
    seen = json.loads(probe.stdout)
    assert seen["collections"] == 0  # no collection walked the imports' objects
    assert seen["enabled"] is True and seen["frozen"] > 0  # back on, with the imported heap out of its way


#: Loads a stdio server's registry with the collector paused, as ``baton serve`` starts, and reports what
#: the collector did while the registry's modules were imported.
REGISTRY_PROBE = """
import asyncio, gc, json, sys
from baton.config import load_settings
from baton.wire import heap
from baton.wire.server import RegistryLoader
collections = lambda: sum(generation["collections"] for generation in gc.get_stats())
heap.pause()
loader = RegistryLoader(load_settings({"BATON_HOME": sys.argv[1]}))
before = collections()
registry = asyncio.run(loader.load())
seen = {"collections": collections() - before, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
registry.runtime.close()
print(json.dumps(seen))
"""


def test_the_registry_is_loaded_with_the_start_up_collector_still_paused_then_frozen(
    baton_env: dict[str, str],
) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", REGISTRY_PROBE, baton_env["BATON_HOME"]],
        env=baton_env,
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(probe.stdout)
    assert seen["collections"] == 0  # no collection walked the registry's imports (on the first spawn's path)
    assert seen["enabled"] is True and seen["frozen"] > 0  # back on once loaded, the loaded heap frozen


async def test_a_registry_loaded_after_a_cached_listing_does_not_build_the_definitions_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {"BATON_HOME": str(tmp_path / "home")}
    first = RegistryLoader(load_settings(environ))
    assert await first.load() is not None  # no cache yet: this load writes it
    assert first.registry is not None
    first.registry.runtime.close()
    built: list[object] = []
    definitions = server.builtin_definitions
    monkeypatch.setattr(
        server, "builtin_definitions", lambda registry: built.append(registry) or definitions(registry)
    )
    second = RegistryLoader(load_settings(environ))
    assert second.cached_tools() is not None  # this code's definitions, read from the cache
    second.listed_from_cache()
    second.written()
    registry = await second.load()
    assert registry is not None
    registry.runtime.close()
    assert built == []


async def test_a_spawn_written_as_a_cached_listing_is_answered_gets_the_models_answer(
    model_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    async with stdio_session(model_env) as session:
        await session.list_tools()  # the first start writes the tool cache
    async with stdio_session(model_env) as session:
        await session.list_tools()  # answered from the cache: the registry and the warm-up start after it
        spawned = await call(session, "mcp_spawn_subagent", {"task": "Say hello.", "mode": "sync"})
    assert spawned["success"] is True, spawned
    assert "Say hello." in spawned["result"]
    assert len(fake_llm.requests) == 1
