"""Proxy overhead: a trivial upstream tool call through baton vs the same client calling the upstream.

The upstream is the test MCP server of ``baton.testing`` running in the same bubblewrap sandbox baton
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


def _live_adapter(home: Path) -> tuple[list[str], Any]:
    """Make ``demo`` live in ``home``; returns the sandbox command line of its upstream and its stage."""
    from baton.config import load_settings
    from baton.gateway.extract import materialize
    from baton.gateway.policy import load_policy
    from baton.gateway.sandbox import BubblewrapSandbox, as_nobody
    from baton.gateway.state import adapter_dir
    from baton.gateway.upstream import runtime_spec
    from baton.runtime import Runtime
    from baton.testing.gateway_adapter import document, make_live, publish, tool
    from baton.testing.npm_registry import NpmRegistryServer

    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(home), "BATON_NPM_REGISTRY": registry.url}))
        try:
            draft = document("demo", publish(registry), [tool("echo", text="string")])
            path = make_live(runtime, draft, allowed=["echo"])
            policy, _ = load_policy(path)
            root = Path(tempfile.mkdtemp(prefix="baton-bench-upstream-"))
            materialize(policy, adapter_dir(runtime, "demo") / "bundle", root)
        finally:
            runtime.close()
    spec = runtime_spec(policy, root, headless=True)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] if as_nobody()[0] else []
    prepared = BubblewrapSandbox().prepare(spec, cgroup=False)  # started by the benchmark's own client
    return [*user, *prepared.argv], (prepared, root)


def run(iterations: int) -> dict[str, Any]:
    """Median and p99 of each path, and baton's (and FastMCP's) ratios to the direct call."""
    from baton.gateway.sandbox import BubblewrapSandbox

    reason = BubblewrapSandbox().unavailable_reason()
    if reason:
        return {"skipped": f"bubblewrap is unavailable: {reason}"}
    with ExitStack() as stack:
        home = stack.enter_context(temp_home())
        upstream, made = _live_adapter(home)
        stack.callback(_remove_tree, made)
        targets = [
            Target("direct (sandboxed upstream)", upstream, "echo", ECHO),
            Target("baton proxy", baton_command(), "demo__echo", ECHO, is_baton=True),
        ]
        python = fastmcp_python()  # None: this interpreter; "": fastmcp is not installed
        if python != "":
            command = peer_command("fastmcp_proxy.py", "--", *upstream, python=python)
            targets.append(Target("fastmcp proxy", command, "echo", ECHO))
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
    baton = rows[1]
    return {
        "title": "gateway proxy overhead (trivial upstream tool call)",
        "rows": rows,
        "target": {
            "what": "gateway proxy: baton p50 through the proxy / direct upstream call (reported, no bound)",
            "value": baton["p50_vs_direct"],
            "met": None,
        },
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
