"""Proxy overhead: an upstream tool call through baton vs the same client calling the upstream.

Two upstreams, measured in one run: the test MCP server of ``baton.testing`` (a trivial stdlib server)
and, in a full run, the real ``@modelcontextprotocol/server-everything`` from the npm registry, locked,
replayed and promoted as a user would (its ``echo``). Each runs in the same bubblewrap sandbox baton
uses; "direct" talks to that sandboxed process itself, "baton" goes through ``baton serve`` (policy,
receipts, the official client) to its own copy of it, and "fastmcp proxy" (when fastmcp is installed)
through FastMCP's proxy to a third copy. Every client is the same raw pipe client of ``_common``.
Run: ``PYTHONPATH=src python -m bench.gateway_proxy [ITERATIONS]``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench._common import PipeClient, baton_command, baton_env, peer_command, ratio, temp_home
from bench._peers import Target, fastmcp_python
from bench.stdio_roundtrip import interleave

ECHO = {"text": "ping"}


#: The real upstream of a full run, pinned so every run measures the same server.
EVERYTHING = "npm:@modelcontextprotocol/server-everything@2026.8.31"


def _trivial_adapter(home: Path) -> str:
    """Make ``demo`` (the test server, tool ``echo``) live in ``home``; returns its adapter id."""
    from baton.config import load_settings
    from baton.runtime import Runtime
    from baton.testing.gateway_adapter import document, make_live, publish, tool
    from baton.testing.npm_registry import NpmRegistryServer

    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(home), "BATON_NPM_REGISTRY": registry.url}))
        try:
            make_live(
                runtime, document("demo", publish(registry), [tool("echo", text="string")]), allowed=["echo"]
            )
        finally:
            runtime.close()
    return "demo"


def _everything_adapter(home: Path) -> str:
    """Lock server-everything from the registry, allow ``echo``, replay and promote it; its adapter id."""
    from baton.config import load_settings
    from baton.gateway.lock import artifacts, stages
    from baton.gateway.policy.policy_files import load_policy, write_policy
    from baton.gateway.replay.replay import replay
    from baton.gateway.serving.promotion import promote
    from baton.runtime import Runtime

    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        locked = artifacts.lock(runtime, EVERYTHING)
        adapter_id, path = locked["adapter_id"], Path(locked["policy_path"])
        stages.verify(runtime, adapter_id)
        replay(runtime, adapter_id, apply=True, record=True)
        policy, _ = load_policy(path)
        names = set(policy.tools.allowed) | set(policy.tools.denied)
        tools = policy.tools.model_copy(update={"allowed": ["echo"], "denied": sorted(names - {"echo"})})
        write_policy(path, policy.model_copy(update={"tools": tools}))
        replay(runtime, adapter_id, apply=True)
        promote(runtime, adapter_id)
    finally:
        runtime.close()
    return adapter_id


def _direct_upstream(home: Path, adapter_id: str) -> tuple[list[str], Any]:
    """The sandbox command line of a live adapter's upstream, for the benchmark's own client."""
    from baton.config import load_settings
    from baton.gateway.policy.policy_files import load_policy
    from baton.gateway.policy.state import adapter_dir
    from baton.gateway.replay.extract import materialize
    from baton.gateway.sandbox.bwrap_command import prepare
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox, as_nobody
    from baton.gateway.serving.upstream import runtime_spec
    from baton.runtime import Runtime

    runtime = Runtime.open(load_settings({"BATON_HOME": str(home)}))
    try:
        policy, _ = load_policy(home / "adapters" / f"{adapter_id}.toml")
        root = Path(tempfile.mkdtemp(prefix="baton-bench-upstream-"))
        materialize(policy, adapter_dir(runtime, adapter_id) / "bundle", root)
    finally:
        runtime.close()
    spec = runtime_spec(policy, root, headless=True)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] if as_nobody()[0] else []
    prepared = prepare(BubblewrapSandbox().bwrap, spec, cgroup=False)  # started by the benchmark's own client
    return [*user, *prepared.argv], (prepared, root)


def measure(
    home: Path, adapter_id: str, tool: str, arguments: dict[str, Any], iterations: int
) -> list[dict[str, Any]]:
    """Direct, baton and FastMCP's proxy on one live adapter, interleaved; ratios to the direct call."""
    with ExitStack() as stack:
        upstream, made = _direct_upstream(home, adapter_id)
        stack.callback(_remove_tree, made)
        targets = [
            Target("direct (sandboxed upstream)", upstream, tool, arguments),
            Target("baton proxy", baton_command(), f"{adapter_id}__{tool}", arguments, is_baton=True),
        ]
        python = fastmcp_python()  # None: this interpreter; "": fastmcp is not installed
        if python != "":
            command = peer_command("fastmcp_proxy.py", "--", *upstream, python=python)
            targets.append(Target("fastmcp proxy", command, tool, arguments))
        clients = [
            stack.enter_context(PipeClient(t.command, baton_env(home) if t.is_baton else None))
            for t in targets
        ]
        for client in clients:
            client.initialize()
            client.call("tools/list")
        rows = interleave(clients, targets, iterations)
    direct = rows[0]
    for row in rows:
        row["p50_vs_direct"] = ratio(row["p50_us"], direct["p50_us"])
        row["p99_vs_direct"] = ratio(row["p99_us"], direct["p99_us"])
        row["p50_added_ms"] = round((row["p50_us"] - direct["p50_us"]) / 1000, 3)
    fastmcp = next((row for row in rows if row["server"] == "fastmcp proxy"), None)
    for row in rows:
        row["p50_vs_fastmcp_proxy"] = ratio(row["p50_us"], fastmcp["p50_us"]) if fastmcp else None
    return rows


def run(iterations: int) -> dict[str, Any]:
    """Both upstreams (server-everything only in a full run, with the registry reachable)."""
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox

    reason = BubblewrapSandbox().unavailable_reason()
    if reason:
        return {"skipped": f"bubblewrap is unavailable: {reason}"}
    rows: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    with temp_home() as home:
        trivial = measure(home, _trivial_adapter(home), "echo", ECHO, iterations)
    rows += [{"upstream": "stdlib test server", **row} for row in trivial]
    targets.append(_vs_fastmcp("stdlib test server", trivial))
    if iterations > 1:
        try:
            with temp_home() as home:
                everything = measure(home, _everything_adapter(home), "echo", {"message": "ping"}, iterations)
        except Exception as exc:  # no registry here: the stdlib figures still stand
            rows.append(
                {"upstream": "server-everything", "server": f"not measured: {type(exc).__name__}: {exc}"}
            )
        else:
            rows += [{"upstream": "server-everything", **row} for row in everything]
            targets.append(_vs_fastmcp("server-everything", everything))
            baton = everything[1]
            targets.append(
                {
                    "what": "gateway proxy: baton's hop adds <= 1.0 ms p50 over the direct call (server-everything echo)",
                    "value": baton["p50_added_ms"],
                    "met": baton["p50_added_ms"] <= 1.0,
                }
            )
    return {"title": "gateway proxy overhead (upstream tool call)", "rows": rows, "targets": targets}


def _vs_fastmcp(upstream: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    value = rows[1]["p50_vs_fastmcp_proxy"]
    return {
        "what": f"gateway proxy: baton p50 <= 0.8x FastMCP's proxy ({upstream})",
        "value": value,
        "met": value <= 0.8 if value is not None else None,
    }


def _remove_tree(made: tuple[Any, Path]) -> None:
    """Remove the sandbox's staging directory (and cgroup) and the extracted upstream tree."""
    prepared, root = made
    prepared.cleanup()
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    import json

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 200), indent=2))
