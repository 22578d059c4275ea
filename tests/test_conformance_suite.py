"""The official MCP conformance suite, pinned, against a real ``baton serve --http`` with the conformance
fixtures on (docs/conformance.md): in both revisions no required scenario and no Tasks scenario may fail.

npx fetches node 22 and the suite from the npm registry once (npm's cache keeps them); each revision then
runs in seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import free_port, http_server

pytestmark = pytest.mark.needs("node", "npm-registry")

SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
NODE = "node@22"  # the suite needs node 22; npx brings it whatever the system's node is
#: Only stops a hang (a first run downloads node and the suite); a run takes seconds once cached.
HANG_GUARD_SECONDS = 900
_DIRECTORY = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_NOT_SCORED = re.compile(r"^\s+[✓✗] (?P<scenario>\S+) \((?P<why>[^)]+)\)$")


@pytest.fixture
def fixtures_url(baton_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """A newcomer's server: a fresh home, ``serve --http`` on loopback, the fixtures on."""
    bind = f"127.0.0.1:{free_port()}"
    with http_server({**baton_env, "BATON_CONFORMANCE_FIXTURES": "1"}, bind, tmp_path):
        yield f"http://{bind}/mcp"


def run_suite(url: str, revision: str, out: Path) -> str:
    """The suite's own command for one revision; its console report (the checks land in ``out``)."""
    command = ["npx", "-y", "-p", NODE, "-p", SUITE, "--", "conformance", "server"]
    command += ["--url", url, "--requirements", revision, "-o", str(out)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert "=== SUMMARY ===" in done.stdout, f"the suite did not run:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def failed_scenarios(out: Path) -> dict[str, list[str]]:
    """Each scenario that ran, with the ids of its failed checks (an empty list: it passed)."""
    scenarios: dict[str, list[str]] = {}
    for checks in sorted(out.glob("*/checks.json")):
        match = _DIRECTORY.match(checks.parent.name)
        assert match, checks.parent.name
        failures = [c["id"] for c in json.loads(checks.read_text()) if c.get("status") == "FAILURE"]
        scenarios[match["scenario"]] = failures
    return scenarios


def not_scored(report: str) -> dict[str, str]:
    """The scenarios the revision does not score (pending, extension, added after release), and why."""
    section = report.split("Not scored for", 1)[1] if "Not scored for" in report else ""
    return {m["scenario"]: m["why"] for line in section.splitlines() if (m := _NOT_SCORED.match(line))}


@pytest.mark.parametrize(("revision", "at_least"), [("2026-07-28", 37), ("2025-11-25", 30)])
def test_the_conformance_suite_finds_no_failure_in_required_or_tasks_scenarios(
    fixtures_url: str, tmp_path: Path, revision: str, at_least: int
) -> None:
    out = tmp_path / "results"
    report = run_suite(fixtures_url, revision, out)
    scenarios = failed_scenarios(out)
    unscored = not_scored(report)
    required = {name for name in scenarios if name not in unscored}
    assert len(required) >= at_least, f"only {len(required)} required scenarios ran:\n{report}"
    if revision == "2026-07-28":
        assert len([name for name in scenarios if name.startswith("tasks-")]) == 10, report
    must_pass = required | {name for name in scenarios if name.startswith("tasks-")}
    failing = {name: ids for name, ids in scenarios.items() if ids and name in must_pass}
    assert failing == {}, f"the conformance suite found failures ({revision}): {failing}\n{report}"
