"""Shadowing is checked across every live adapter, keyed by adapter and tool, at replay, at promote and at
every start of a real ``python -m baton serve``.

Four copies of the test server: ``eslint`` and ``n8n`` both have ``lint`` (the pair the issue reproduced
with), ``other`` and ``solo`` both have ``fmt``. One test, in order, because each step builds on the
live set the one before left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.policy.snapshot import serving_root
from baton.gateway.policy.state import get_adapter
from baton.gateway.replay.poisoning import shadow_finding_id
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, make_replayed, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_gateway
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

LINT = [tool("lint", text="string")]
FMT = [tool("fmt", text="string")]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def registry() -> Iterator[NpmRegistryServer]:
    with NpmRegistryServer() as server:
        yield server


@pytest.fixture(scope="module")
def tarball(registry: NpmRegistryServer) -> bytes:
    """The test server, published."""
    return publish(registry)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, registry: NpmRegistryServer) -> dict[str, str]:
    """A home, and the environment ``baton`` runs in."""
    home = tmp_path_factory.mktemp("shadowing") / "home"
    return baton_environ(home, BATON_NPM_REGISTRY=registry.url)


def prepared(
    env: dict[str, str], tarball: bytes, adapter_id: str, tools: list[dict[str, Any]], *, live: bool
) -> None:
    """Lock, verify and replay ``adapter_id`` (its tools allowed), and promote it when ``live``."""
    runtime = Runtime.open(load_settings(env))
    try:
        draft = document(adapter_id, tarball, tools)
        names = [t["name"] for t in tools]
        if live:
            make_live(runtime, draft, allowed=names, allow_destructive_without_approval=names)
        else:
            make_replayed(runtime, draft, allowed=names, allow_destructive_without_approval=names)
    finally:
        runtime.close()


def promote(env: dict[str, str], adapter_id: str, *accepted: str) -> tuple[int, str]:
    """``baton gateway promote ID [--accept-finding F]…`` as a CLI process: its exit code and stderr."""
    flags = [arg for finding in accepted for arg in ("--accept-finding", finding)]
    done = run_gateway(env, "promote", adapter_id, *flags)
    return done.returncode, done.stderr


def hidden(env: dict[str, str], adapter_id: str) -> tuple[Path, bytes]:
    """The served snapshot's policy file of ``adapter_id`` and its bytes (to hide it, then restore it)."""
    runtime = Runtime.open(load_settings(env))
    try:
        row = get_adapter(runtime, adapter_id) or {}
        path = serving_root(runtime, adapter_id, row["serving_policy_checksum"]) / "policy.toml"
    finally:
        runtime.close()
    return path, path.read_bytes()


async def served(env: dict[str, str], names: list[str]) -> dict[str, Any]:
    """A fresh ``baton serve``: each name's call result and ``mcp_list_adapters``' block class by adapter."""
    async with stdio_session(env) as session:
        results = {name: await call(session, name, {"text": "x"}) for name in names}
        adapters = (await call(session, "mcp_list_adapters"))["adapters"]
    blocks = {a["adapter_id"]: a.get("block_error_class") for a in adapters if a.get("live")}
    return {
        "calls": {n: r.get("error_class") if not r["success"] else "ok" for n, r in results.items()},
        **blocks,
    }


async def test_shadowing_is_found_at_replay_promote_and_start_whoever_is_live(
    env: dict[str, str], tarball: bytes
) -> None:
    # replay: n8n's lint shadows the live eslint's, also once n8n itself is live (one map by tool name
    # let n8n's own entry overwrite eslint's, and the finding vanished)
    prepared(env, tarball, "eslint", LINT, live=True)
    prepared(env, tarball, "n8n", LINT, live=False)
    shadows_eslint = shadow_finding_id("lint", "eslint")
    code, error = promote(env, "n8n")
    assert code != 0 and "mcp_tool_poisoning_suspected" in error and shadows_eslint in error, error
    assert promote(env, "n8n", shadows_eslint)[0] == 0
    replayed = json.loads(run_gateway(env, "replay", "n8n", "--apply", "--json").stdout)
    assert shadows_eslint in {f["id"] for f in replayed["poisoning_findings"]}
    code, error = promote(env, "n8n")
    assert code != 0 and shadows_eslint in error, error
    assert promote(env, "n8n", shadows_eslint)[0] == 0

    # promote: solo was replayed before other went live; its promotion sees other now
    prepared(env, tarball, "solo", FMT, live=False)
    prepared(env, tarball, "other", FMT, live=True)
    shadows_other = shadow_finding_id("fmt", "other")
    code, error = promote(env, "solo")
    assert code != 0 and "mcp_tool_poisoning_suspected" in error and shadows_other in error, error

    # start: solo promoted while other did not load (a race, an older baton): both live, nobody accepted
    path, original = hidden(env, "other")
    path.write_bytes(b"this is not toml [")  # the adapter does not load (skipped, as a stale snapshot is)
    try:
        code, error = promote(env, "solo")
        assert code == 0, error
    finally:
        path.write_bytes(original)
    names = ["eslint__lint", "n8n__lint", "solo__fmt", "other__fmt"]
    found = await served(env, names)
    assert found["calls"] == {
        "eslint__lint": "ok",  # the collision n8n accepted serves both sides
        "n8n__lint": "ok",
        "solo__fmt": "mcp_tool_poisoning_suspected",  # nobody accepted this one: neither side serves
        "other__fmt": "mcp_tool_poisoning_suspected",
    }
    assert (found["solo"], found["other"], found["eslint"]) == (
        "mcp_tool_poisoning_suspected",
        "mcp_tool_poisoning_suspected",
        None,
    )

    # the advice works: accept it at solo's promotion, and the next start serves both
    assert promote(env, "solo", shadows_other)[0] == 0
    assert (await served(env, names))["calls"] == dict.fromkeys(names, "ok")
