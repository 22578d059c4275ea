"""The tool-poisoning scan over the coverage table's servers (docs/gateway.md, "Coverage").

``python -m bench.poisoning_survey [--only NAME…]`` locks, verifies and replays each server at the table's
version through the real CLI (``lock`` → ``verify`` → ``replay --apply --record-contract``) in one
fresh ``BATON_HOME``, and writes ``bench/results/poisoning-survey.json``: per server, its status, tool
count, the replay's ``poisoning_findings`` and the tool definitions it observed. Nothing is promoted, so
the cross-adapter kinds (``name_shadows_adapter_tool``, another live adapter's tool) cannot fire here.
It needs the public npm registry and PyPI, and bubblewrap.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "poisoning-survey.json"
#: The surveyed definitions and their findings, which tests/gateway/test_poisoning_coverage.py re-scans offline.
DATA = ROOT / "tests" / "gateway" / "data" / "coverage-tool-definitions.json"

#: (candidate, extra lock flags, policy edits) of the 36 servers the coverage table replays.
SERVERS: list[tuple[str, list[str], dict[str, Any]]] = [
    ("npm:@modelcontextprotocol/server-everything@2026.8.31", [], {}),
    ("npm:@modelcontextprotocol/server-filesystem@2026.8.31", ["--argument", "/tmp"], {}),  # noqa: S108 -- in the sandbox
    ("npm:@modelcontextprotocol/server-memory@2026.8.31", [], {}),
    ("npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31", [], {}),
    ("npm:@upstash/context7-mcp@4.1.1", [], {}),
    ("npm:@playwright/mcp@0.0.83", [], {}),
    ("npm:@modelcontextprotocol/server-github@2025.4.8", [], {}),
    (
        "npm:@modelcontextprotocol/server-puppeteer@2025.5.12",
        ["--allow-without-install-scripts", "puppeteer"],
        {},
    ),
    ("npm:@modelcontextprotocol/server-postgres@0.6.2", ["--argument", "postgresql://127.0.0.1:1/none"], {}),
    ("npm:@notionhq/notion-mcp-server@2.5.2", [], {}),
    (
        "npm:@wonderwhy-er/desktop-commander@0.2.52",
        ["--allow-without-install-scripts", "@wonderwhy-er/desktop-commander,puppeteer,sharp"],
        {},
    ),
    ("npm:chrome-devtools-mcp@1.11.0", [], {}),
    (
        "npm:@executeautomation/playwright-mcp-server@1.0.12",
        [
            "--allow-without-install-scripts",
            "@playwright/browser-chromium,@playwright/browser-firefox,@playwright/browser-webkit,esbuild,protobufjs",
        ],
        {},
    ),
    ("npm:firecrawl-mcp@3.26.0", ["--allow-without-install-scripts", "tldjs"], {}),
    ("npm:@agentdeskai/browser-tools-mcp@2.0.2", [], {}),
    ("npm:@antv/mcp-server-chart@0.9.10", [], {}),
    ("npm:@kimtaeyoon83/mcp-server-youtube-transcript@0.1.1", [], {}),
    ("npm:mcp-server-kubernetes@4.1.7", ["--allow-without-install-scripts", "protobufjs"], {}),
    ("npm:tavily-mcp@0.2.22", [], {}),
    ("npm:exa-mcp-server@3.4.1", [], {}),
    (
        "npm:@azure/mcp@2.0.5",
        ["--allow-without-install-scripts", "@azure/mcp", "--argument", "server", "--argument", "start"],
        {},
    ),
    ("npm:@jpisnice/shadcn-ui-mcp-server@2.0.0", [], {}),
    ("npm:@cyanheads/git-mcp-server@2.15.3", [], {}),
    ("npm:@mzxrai/mcp-webresearch@0.1.7", ["--allow-without-install-scripts", "@mzxrai/mcp-webresearch"], {}),
    ("pypi:mcp-server-time==2026.10.19", [], {}),
    ("pypi:mcp-server-fetch==2026.10.24", [], {}),
    ("pypi:mcp-server-git==2026.10.19", [], {}),
    (
        "pypi:mcp-server-sqlite==2025.4.25",
        ["--constraint", "mcp<2", "--argument", "--db-path", "--argument", "/tmp/mcp.db"],  # noqa: S108 -- in the sandbox
        {},
    ),
    ("pypi:awslabs.aws-documentation-mcp-server==1.2.3", [], {}),
    # its imports take over 30 s on a loaded machine (the survey's first try timed out at start)
    ("pypi:markitdown-mcp==0.0.1a8", [], {"startup_timeout_seconds": 120}),
    ("pypi:duckduckgo-mcp-server==0.7.0", [], {}),
    ("pypi:arxiv-mcp-server==0.8.2", [], {}),
    ("pypi:mcp-server-calculator==0.2.1", [], {}),
    ("pypi:wikipedia-mcp==2.0.1", [], {}),
    (
        "pypi:semgrep-mcp==0.9.0",
        [
            "--constraint",
            "pydantic<2.12",
            "--constraint",
            "setuptools<81",
            "--env",
            "SEMGREP_MCP_DISABLE_TRACING=true",
            "--env",
            "USE_SEMGREP_RPC=false",
        ],
        {"startup_timeout_seconds": 120},
    ),
    ("pypi:blender-mcp==2.0.0", [], {}),
]


#: Packages each closure pins (the coverage table's column): small closures are surveyed first.
SMALL_FIRST = {
    "chrome-devtools-mcp": 1, "azure-mcp": 2, "playwright-mcp": 3, "mcp-server-time": 31,
    "mcp-server-calculator": 30, "mcp-server-git": 32, "blender-mcp": 31, "mcp-server-sqlite": 37,
    "duckduckgo-mcp-server": 42, "arxiv-mcp-server": 45, "awslabs-aws-documentation-mcp-server": 45,
    "mcp-server-fetch": 46, "markitdown-mcp": 71, "wikipedia-mcp": 70, "semgrep-mcp": 63,
    "mzxrai-mcp-webresearch": 19, "modelcontextprotocol-server-postgres": 29,
    "cyanheads-git-mcp-server": 35, "modelcontextprotocol-server-github": 49,
    "kimtaeyoon83-mcp-server-youtube-transcript": 49, "modelcontextprotocol-server-memory": 96,
    "modelcontextprotocol-server-filesystem": 104, "upstash-context7-mcp": 106,
    "modelcontextprotocol-server-everything": 108, "antv-mcp-server-chart": 109,
    "modelcontextprotocol-server-sequential-thinking": 113, "modelcontextprotocol-server-puppeteer": 118,
    "tavily-mcp": 126, "exa-mcp-server": 133, "notionhq-notion-mcp-server": 168, "firecrawl-mcp": 188,
    "jpisnice-shadcn-ui-mcp-server": 188, "agentdeskai-browser-tools-mcp": 200,
    "executeautomation-playwright-mcp-server": 273, "mcp-server-kubernetes": 345,
    "wonderwhy-er-desktop-commander": 630,
}  # fmt: skip


def adapter_id(candidate: str) -> str:
    """A valid adapter id for a candidate (the table's packages map one to one)."""
    name = re.split(r"@(?=[0-9])|==", candidate.split(":", 1)[1])[0]
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]


def baton(env: dict[str, str], *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """``python -m baton gateway ARGS`` with this checkout's source first."""
    return subprocess.run(
        [sys.executable, "-m", "baton", "gateway", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def edit_runtime(home: Path, adapter: str, changes: dict[str, Any]) -> None:
    """Set runtime fields no lock flag takes (semgrep's startup timeout) through the policy model."""
    sys.path.insert(0, str(ROOT / "src"))
    from baton.gateway.policy.policy_files import load_policy, write_policy

    path = home / "adapters" / f"{adapter}.toml"
    policy, _ = load_policy(path, check_expiry=False)
    write_policy(path, policy.model_copy(update={"runtime": policy.runtime.model_copy(update=changes)}))


def survey_one(
    env: dict[str, str], candidate: str, flags: list[str], runtime: dict[str, Any]
) -> dict[str, Any]:
    """Lock, verify and replay one server; its findings and definitions, or the step that failed."""
    adapter = adapter_id(candidate)
    row: dict[str, Any] = {"candidate": candidate, "adapter_id": adapter}
    started = time.monotonic()
    steps = [("lock", [candidate, "--id", adapter, *flags, "--json"]), ("verify", [adapter, "--json"])]
    for name, args in steps:
        done = baton(env, name, *args)
        if done.returncode != 0:
            return {**row, "status": f"{name} failed", "error": done.stderr.strip()[-600:]}
    if runtime:
        edit_runtime(Path(env["BATON_HOME"]), adapter, runtime)
    done = baton(env, "replay", adapter, "--apply", "--record-contract", "--json")
    if done.returncode != 0:
        return {**row, "status": "replay failed", "error": done.stderr.strip()[-600:]}
    result = json.loads(done.stdout)
    receipts = Path(env["BATON_HOME"]) / "gateway" / adapter / "receipts"
    receipt = json.loads((receipts / f"replay-{result['run_id']}.json").read_text(encoding="utf-8"))
    return {
        **row,
        "status": "replayed",
        "seconds": round(time.monotonic() - started, 1),
        "server": {
            k: receipt.get("protocol_observation", {}).get(k) for k in ("server_name", "server_version")
        },
        "tool_count": len(receipt.get("tool_definitions") or []),
        "findings": receipt.get("poisoning_findings") or [],
        "tool_definitions": receipt.get("tool_definitions") or [],
    }


def report(result: Path = RESULT, data: Path = DATA) -> str:
    """Write the surveyed definitions with their findings (alone, and as if all were live together) to
    the test data, and return the markdown table docs/gateway.md carries."""
    sys.path.insert(0, str(ROOT / "src"))
    from baton.gateway.replay.poisoning import scan

    rows = json.loads(result.read_text(encoding="utf-8"))["servers"]
    done = [r for r in rows if r["status"] == "replayed"]
    for row in done:
        alone = scan(row["tool_definitions"], adapter_id=row["adapter_id"])
        assert [f["id"] for f in alone] == [f["id"] for f in row["findings"]], row["adapter_id"]
    missing = [
        {"candidate": r["candidate"], "status": r["status"]} for r in rows if r["status"] != "replayed"
    ]
    return _write_and_table(done, missing, data)


def rescan(data: Path = DATA) -> str:
    """Scan the recorded definitions again with the current checks (no replay), rewrite their findings in
    the test data, and return the table: what a change to the checks does to the 36 real servers."""
    recorded = json.loads(data.read_text(encoding="utf-8"))
    return _write_and_table(recorded["servers"], recorded["not_surveyed"], data)


def _write_and_table(done: list[dict[str, Any]], missing: list[dict[str, Any]], data: Path) -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from baton.gateway.replay.poisoning import scan

    servers = []
    for row in done:
        definitions = row["tool_definitions"]
        alone = scan(definitions, adapter_id=row["adapter_id"])
        everyone = {d["name"]: r["adapter_id"] for r in done if r is not row for d in r["tool_definitions"]}
        together = scan(definitions, adapter_id=row["adapter_id"], other_tools=everyone)
        servers.append(
            {
                "candidate": row["candidate"],
                "adapter_id": row["adapter_id"],
                "server": row["server"],
                "tool_definitions": definitions,
                "findings_alone": alone,
                "findings_with_all_live": together,
            }
        )
    data.write_text(
        json.dumps({"servers": servers, "not_surveyed": missing}, indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    lines = [
        "| server | tools | findings at replay | more if all 36 were live together |",
        "| --- | --- | --- | --- |",
    ]
    details = []
    for server in servers:
        alone = {f["id"] for f in server["findings_alone"]}
        more = [f for f in server["findings_with_all_live"] if f["id"] not in alone]
        name = server["candidate"].split(":", 1)[1]
        lines.append(
            f"| `{name}` | {len(server['tool_definitions'])} | {len(alone) or 'none'} | {len(more) or 'none'} |"
        )
        if server["findings_with_all_live"]:
            found = "; ".join(
                f"`{f['id']}` {f['tool']} ({f['where']}: {f['detail']})"
                for f in server["findings_with_all_live"]
            )
            details.append(f"- `{name}`: {found}")
    return "\n".join([*lines, "", *details])


def main() -> int:
    """Survey the table's servers (or ``--only`` some) and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="adapter ids to survey (default: all 36)")
    parser.add_argument("--result", default=str(RESULT), help="the results file (merged with its rows)")
    parser.add_argument("--largest-first", action="store_true", help="survey the largest closures first")
    parser.add_argument("--again", action="store_true", help="survey servers already surveyed again")
    parser.add_argument("--home", help="BATON_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--report", action="store_true", help="only write the test data and print the table")
    parser.add_argument(
        "--rescan", action="store_true", help="re-scan the recorded test data, print the table"
    )
    options = parser.parse_args()
    if options.report or options.rescan:
        print(rescan() if options.rescan else report())
        return 0
    home = Path(options.home or tempfile.mkdtemp(prefix="baton-survey-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env["BATON_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    result = Path(options.result)
    previous = json.loads(result.read_text()) if result.exists() else {"servers": []}
    rows = {row["candidate"]: row for row in previous["servers"]}
    order = sorted(
        SERVERS, key=lambda s: SMALL_FIRST.get(adapter_id(s[0]), 999), reverse=options.largest_first
    )
    for candidate, flags, runtime in order:
        if options.only and adapter_id(candidate) not in options.only:
            continue
        if not options.again and rows.get(candidate, {}).get("status") == "replayed":
            continue  # done by an earlier run (--again redoes it)
        try:
            row = survey_one(env, candidate, flags, runtime)
        except subprocess.TimeoutExpired as exc:
            row = {
                "candidate": candidate,
                "adapter_id": adapter_id(candidate),
                "status": f"timeout: {exc.cmd[4]}",
            }
        rows[candidate] = row
        print(f"{row['adapter_id']}: {row['status']} {len(row.get('findings') or [])} finding(s)", flush=True)
        table = [c for c, _, _ in SERVERS]
        servers = sorted(
            rows.values(), key=lambda r: table.index(r["candidate"]) if r["candidate"] in table else 99
        )
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps({"servers": servers}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
