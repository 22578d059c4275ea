"""What ``baton serve`` does between its first line and its first ``tools/list`` answer: the collector is
paused through start-up and back on (start-up frozen) once the registry loads, and the registry's load
waits until the cached ``tools/list`` answer has been written (baton.wire.heap, baton.wire.server.RegistryLoader)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.config import load_settings
from baton.wire import heap
from baton.wire.server import RegistryLoader

pytestmark = pytest.mark.anyio


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the interpreter's collector as the test found it (on, nothing frozen)."""
    try:
        yield
    finally:
        heap.resume()
        gc.unfreeze()
        gc.enable()


def test_pause_stops_collections_and_resume_freezes_start_up_and_restarts_them(collector: None) -> None:
    gc.unfreeze()
    heap.pause()
    assert not gc.isenabled()
    kept = [object() for _ in range(1000)]
    heap.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)
    frozen = gc.get_freeze_count()
    heap.resume()  # a second resume changes nothing
    assert gc.get_freeze_count() == frozen


def test_resume_never_turns_on_a_collector_that_was_off_before(collector: None) -> None:
    gc.unfreeze()
    gc.disable()
    heap.pause()
    heap.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


async def test_the_registry_load_resumes_the_collector(baton_env: dict[str, str], collector: None) -> None:
    heap.pause()
    loader = RegistryLoader(load_settings(baton_env))
    registry = await loader.load()
    assert registry is not None and loader.error is None
    try:
        assert gc.isenabled()
        assert "mcp_ping" in registry.tools
    finally:
        registry.runtime.close()


def test_loading_waits_for_the_cached_tools_list_answer_to_be_written(tmp_path: Path) -> None:
    loader = RegistryLoader(load_settings({"BATON_HOME": str(tmp_path / "home")}))
    loader.written()  # the initialize answer: nothing was listed yet
    assert not loader.wanted.is_set()
    loader.listed_from_cache()  # the answer is built, not yet serialized and written
    assert not loader.wanted.is_set()
    loader.written()
    assert loader.wanted.is_set()
