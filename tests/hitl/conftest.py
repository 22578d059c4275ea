"""Fixtures for the human-in-the-loop tests: an in-process runtime and broker on a fresh BATON_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.hitl.broker import HitlBroker, get_broker
from baton.runtime import Runtime
from tests.hitl.helpers import HttpServer


@pytest.fixture
def runtime(baton_env: dict[str, str]) -> Iterator[Runtime]:
    """A runtime on the test's BATON_HOME (the same store a subprocess with baton_env uses)."""
    rt = Runtime.open(load_settings(baton_env))
    yield rt
    rt.close()


@pytest.fixture
def broker(runtime: Runtime) -> HitlBroker:
    """The runtime's broker."""
    return get_broker(runtime)


@pytest.fixture
def http_server_factory(tmp_path: Path) -> Iterator[Any]:
    """Start HTTP servers; every one is stopped at the end of the test."""
    started: list[HttpServer] = []

    def start(env: dict[str, str]) -> HttpServer:
        server = HttpServer(env, tmp_path / f"http-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
