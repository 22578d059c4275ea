"""Every policy version ever pinned stays findable by its hash, so offline replay judges old calls by the
policy they ran under: a real ``baton serve`` (stdio) serves a Cedar policy, the adapter is re-pinned with a
stricter one and promoted again (which prunes the old serving snapshot), and ``baton receipts verify
--replay`` still re-derives both calls' verdicts, each under its own version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.gateway.policy.cedar_policy import pin, sha256_of
from baton.gateway.replay.replay import replay
from baton.gateway.serving.promotion import promote
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli
from tests.conftest import baton_environ, call, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

FIRST = '@id("queries")\npermit(principal, action == Action::"query", resource);\n'
SECOND = '@id("read-only")\npermit(principal, action == Action::"query", resource)\n  when { context.arguments.sql like "SELECT*" };\n'


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A home with ``ledger`` live under the first Cedar policy."""
    home = tmp_path / "home"
    environment = baton_environ(home)
    with NpmRegistryServer() as registry, registry_runtime(home, registry) as runtime:
        make_live(
            runtime,
            document("ledger", publish(registry), [tool("query", sql="string")]),
            allowed=["query"],
            call_policy=FIRST,
        )
    return environment


def _repin(env: dict[str, str], tmp_path: Path) -> None:
    """The second policy pinned, replayed and promoted, as ``baton gateway policy pin``, ``replay --apply``
    and ``promote`` do."""
    source = tmp_path / "second.cedar"
    source.write_text(SECOND, encoding="utf-8")
    runtime = Runtime.open(load_settings(env))
    try:
        pin(runtime, "ledger", str(source))
        replay(runtime, "ledger", apply=True)
        promote(runtime, "ledger")
    finally:
        runtime.close()


async def test_replay_judges_each_call_by_the_policy_version_it_ran_under(
    env: dict[str, str], tmp_path: Path
) -> None:
    async with stdio_session(env) as session:
        assert (await call(session, "ledger__query", {"sql": "DELETE FROM t"}))["success"] is True
    _repin(env, tmp_path)
    async with stdio_session(env) as session:
        refused: dict[str, Any] = await call(session, "ledger__query", {"sql": "DELETE FROM t"})
        assert refused["error_class"] == "gateway_policy_forbidden"
    serving = Path(env["BATON_HOME"]) / "gateway" / "ledger" / "serving"
    assert len(list(serving.iterdir())) == 1  # the first version's snapshot is gone
    kept = Path(env["BATON_HOME"]) / "gateway" / "policies"
    assert {sha256_of(FIRST), sha256_of(SECOND)} <= {p.stem for p in kept.glob("*.cedar")}
    done = run_cli(env, "receipts", "verify", "--replay")
    assert done.returncode == 0, done.stderr
    assert "replay: 2 gateway calls re-derived their recorded verdict; 0 differ" in done.stdout
    listed = run_cli(env, "receipts", "list", "--kind", "gateway_call", "--json")
    pins = [row["payload"]["call_policy_sha256"] for row in json.loads(listed.stdout)]
    assert sorted(pins) == sorted([sha256_of(FIRST), sha256_of(SECOND)])  # one call under each version
