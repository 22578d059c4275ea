"""The suite's own rule: a missing tool fails the run under CI and skips (with its reason) elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import PRETEND_MISSING

ROOT = Path(__file__).resolve().parents[1]


def pytest_run(*args: str, ci: bool, missing: str) -> subprocess.CompletedProcess[str]:
    # the outer run's PYTEST_ADDOPTS (.ci/run passes the random-order seed there) is not for this run,
    # which has random order off
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env[PRETEND_MISSING] = missing
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "0",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-rs",
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("target", "tool"),
    [
        ("tests/hitl/test_inbox_browser.py", "chromium"),  # a module mark
        ("tests/test_signals.py::test_a_publish_on_one_replica_wakes_a_waiter_on_another", "postgresql"),
        ("tests/gateway/test_sandbox.py::test_the_rlimits_reach_the_sandboxed_process", "bwrap"),
    ],
)
def test_a_missing_tool_fails_under_ci_and_skips_elsewhere(target: str, tool: str) -> None:
    in_ci = pytest_run(target, ci=True, missing=tool)
    assert in_ci.returncode == 1, in_ci.stdout[-2000:]
    assert f"CI needs {tool}" in in_ci.stdout
    outside = pytest_run(target, ci=False, missing=tool)
    assert outside.returncode == 0, outside.stdout[-2000:]
    assert "SKIPPED" in outside.stdout and f"needs {tool}" in outside.stdout
