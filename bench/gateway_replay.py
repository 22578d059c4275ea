"""Replay time of the real @playwright/mcp with and without the bubblewrap sandbox.

Each iteration starts the server, runs initialize + notifications/initialized + tools/list,
closes stdin and waits for the clean exit; the extracted tree is shared by both variants.
Run: ``PYTHONPATH=src python bench/gateway_replay.py [ITERATIONS]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from baton.config import load_settings
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy import state
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import load_policy
from baton.gateway.replay.extract import materialize
from baton.gateway.replay.observation import observe, sandbox_spec
from baton.gateway.replay.protocol import Session
from baton.gateway.replay.replay import replay
from baton.gateway.sandbox.sandbox import BubblewrapSandbox
from baton.gateway.sandbox.sandbox_spec import SandboxSpec
from baton.runtime import Runtime

SPEC = "npm:@playwright/mcp@0.0.83"
ARGUMENTS = [
    "--headless",
    "--isolated",
    "--output-dir",
    "/tmp/mcp-output",  # noqa: S108 -- a path inside the sandbox's own tmpfs
    "--executable-path",
    "/nonexistent/browser",
]
CACHE = Path(
    os.environ.get("BATON_TEST_CACHE") or Path(__file__).resolve().parents[1] / ".pytest_cache" / "baton-npm"
)


class Unsandboxed:
    """The same process started directly on the host: the baseline, never used by baton itself."""

    name = "none"

    def unavailable_reason(self) -> str | None:
        """Always available."""
        return None

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start ``spec.argv`` in the extracted tree."""
        env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir(), "CI": "1", **spec.env}
        return subprocess.Popen(
            spec.argv, cwd=spec.workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """Nothing to remove."""
        return process.poll() is not None


def _prepare(home: Path) -> tuple[Runtime, Policy]:
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home), "BATON_ARTIFACT_CACHE": str(CACHE)}))
    artifacts.lock(runtime, SPEC, arguments=ARGUMENTS)
    stages.verify(runtime, "playwright-mcp")
    replay(runtime, "playwright-mcp", apply=True, record=True)
    policy, _ = load_policy(home / "adapters" / "playwright-mcp.toml")
    return runtime, policy


def _once(policy: Policy, sandbox: Any, spec: SandboxSpec) -> float:
    started = time.perf_counter()
    observation = observe(policy, sandbox, spec, Session())
    assert observation.session.shutdown_mode == "stdin_eof_clean_exit"
    return time.perf_counter() - started


def _time(policy: Policy, spec: SandboxSpec, iterations: int) -> tuple[list[float], list[float]]:
    """Alternate the two variants so load from other processes hits both alike."""
    sandboxed, direct = [], []
    for _ in range(iterations):
        sandboxed.append(_once(policy, BubblewrapSandbox(), spec))
        direct.append(_once(policy, Unsandboxed(), spec))
    return sandboxed, direct


def run(iterations: int) -> dict[str, Any]:
    """Median seconds per replay in bubblewrap and unsandboxed, and their ratio."""
    home = Path(tempfile.mkdtemp(prefix="baton-bench-"))
    root = Path(tempfile.mkdtemp(prefix="baton-bench-tree-"))
    try:
        runtime, policy = _prepare(home)
        started = time.perf_counter()
        extracted = materialize(policy, state.adapter_dir(runtime, policy.id) / "bundle", root)
        extraction = time.perf_counter() - started
        runtime.close()
        spec = sandbox_spec(policy, root)
        sandboxed, direct = _time(policy, spec, iterations)
    finally:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return {
        "benchmark": "gateway_replay",
        "package": SPEC,
        "iterations": iterations,
        "extraction_seconds": round(extraction, 3),
        "package_file_count": extracted.file_count,
        "bubblewrap_median_seconds": round(statistics.median(sandboxed), 3),
        "unsandboxed_median_seconds": round(statistics.median(direct), 3),
        "ratio_bubblewrap_to_unsandboxed": round(statistics.median(sandboxed) / statistics.median(direct), 2),
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=2))
