"""The benchmark runner behind ``bench/run``: machine description, each module, a rich table, JSON."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).resolve().parent / "results"

#: Module name -> iterations of a full run (calls per server, spawns per server, ...).
MODULES: dict[str, int] = {
    "receipt_append": 5000,
    "stdio_roundtrip": 2000,
    "http_roundtrip": 1000,
    "http_concurrency": 500,
    "cold_start": 10,
    "first_model_call": 5,
    "fanout": 2,
    "chat_body": 200,
    "receipts_verify": 1_000_000,
    "scale": 2,
}
#: Written by other subsystems' developers; run when present, skipped otherwise.
OPTIONAL_MODULES: dict[str, int] = {
    "receipt_append": 5000,
    "gateway_proxy": 1000,
    "gateway_replay": 5,
    "hitl_wakeup": 200,
    "replica_wakeup": 100,
    "subagent_tools": 100,
}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor() or "unknown",
        )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "mcp": version_of("mcp"),
        "fastmcp": version_of("fastmcp"),
        # the fan-out's CPU floor is these two clients' cost (bench/fanout.py)
        "openai": version_of("openai"),
        "pydantic_ai": version_of("pydantic-ai-slim"),
        "baton": version_of("baton"),
    }


def version_of(package: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_module(name: str, iterations: int, console: Console) -> dict[str, Any]:
    """Import and run one benchmark module; failures are recorded, not raised."""
    started = time.perf_counter()
    console.print(f"[dim]running {name} (iterations={iterations}) ...[/dim]")
    try:
        result: dict[str, Any] = importlib.import_module(f"bench.{name}").run(iterations)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    if not isinstance(result, dict):
        return {"error": f"bench/{name}.py run() returned {type(result).__name__}, not a dict"}
    result["iterations"] = iterations
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def plan(args: argparse.Namespace) -> dict[str, int | None]:
    """Module -> iterations, None for an optional module that is absent."""
    selected = set(args.only.split(",")) if args.only else None
    chosen: dict[str, int | None] = {}
    for name, default in {**MODULES, **OPTIONAL_MODULES}.items():
        if selected is not None and name not in selected:
            continue
        present = name in MODULES or importlib.util.find_spec(f"bench.{name}") is not None
        chosen[name] = (args.iterations or default) if present else None
    return chosen


def render(report: dict[str, Any], console: Console) -> None:
    """The machine, each benchmark's rows and the targets, as rich tables."""
    info = Table("machine", "", title="baton benchmarks", show_header=False)
    for key, value in report["machine"].items():
        info.add_row(key, str(value))
    console.print(info)
    for name, result in report["benchmarks"].items():
        console.print(result_table(name, result))
    targets = Table("target", "value", "met", title="targets")
    for target in report["targets"]:
        met = {True: "[green]yes[/green]", False: "[red]no[/red]"}.get(target.get("met"), "-")
        met = "smoke" if report.get("smoke") else met
        targets.add_row(str(target.get("what", "?")), str(target.get("value")), met)
    console.print(targets)


def result_table(name: str, result: dict[str, Any]) -> Table:
    """One benchmark's rows (columns are the union of the rows' keys)."""
    if "rows" not in result:
        table = Table("", "", title=name, show_header=False)
        for key, value in result.items():
            if key != "traceback":
                table.add_row(key, str(value))
        return table
    columns: list[str] = []
    for row in result["rows"]:
        columns += [key for key in row if key not in columns]
    table = Table(*columns, title=f"{result.get('title', name)} ({result.get('seconds', '?')} s)")
    for row in result["rows"]:
        table.add_row(*(format_cell(row.get(column)) for column in columns))
    return table


def format_cell(value: Any) -> str:
    """Numbers rounded for reading; everything else as text."""
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return "" if value is None else str(value)


def collect_targets(benchmarks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every module's ``target`` (one dict or a list of them)."""
    targets: list[dict[str, Any]] = []
    for result in benchmarks.values():
        found = result.get("target") or result.get("targets") or []
        targets += [t for t in (found if isinstance(found, list) else [found]) if isinstance(t, dict)]
    return targets


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (what docs/benchmarks.md shows)."""
    m = report["machine"]
    lines = [
        f"Measured {report['started_at'][:16].replace('T', ' ')} UTC on {m['cpu']}, {m['cores']} cores "
        f"(load {m['load_average_1m']}), Python {m['python']}, mcp {m['mcp']}, fastmcp {m['fastmcp']}, "
        f"openai {m.get('openai')}, pydantic-ai {m.get('pydantic_ai')}; "
        f"whole run {report['duration_seconds']} s.",
        "",
    ]
    for name, result in report["benchmarks"].items():
        if "rows" not in result:
            if result.get("skipped") or result.get("error"):
                lines += [f"**{name}**: {result.get('skipped') or result.get('error')}", ""]
                continue
            lines += [
                f"**{name}** ({result.get('iterations')} iterations)",
                "",
                "| field | value |",
                "|---|---|",
            ]
            for key, value in result.items():
                if key in ("benchmark", "iterations"):
                    continue
                if isinstance(value, dict):
                    value = ", ".join(f"{k} {format_cell(v)}" for k, v in value.items())
                lines.append(f"| {key} | {format_cell(value) if not isinstance(value, str) else value} |")
            lines.append("")
            continue
        columns: list[str] = []
        for row in result["rows"]:
            columns += [key for key in row if key not in columns]
        lines += [f"**{result.get('title', name)}** ({result.get('iterations')} iterations)", ""]
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += [
            "| " + " | ".join(format_cell(row.get(c)) for c in columns) + " |" for row in result["rows"]
        ]
        lines.append("")
    lines += ["| target | value | met |", "|---|---|---|"]
    for target in report["targets"]:
        met = {True: "yes", False: "**no**"}.get(target.get("met"), "-")
        lines.append(f"| {target.get('what', '?')} | {target.get('value')} | {met} |")
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line of ``bench/run``."""
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one iteration of everything (CI smoke)")
    parser.add_argument("--iterations", type=int, help="iterations for every module (default: per module)")
    parser.add_argument("--only", help="comma-separated module names, e.g. stdio_roundtrip,cold_start")
    parser.add_argument("--output", type=Path, help="JSON file (default: bench/results/latest.json)")
    parser.add_argument(
        "--markdown", type=Path, metavar="JSON", help="print a results file as Markdown; run nothing"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations = 1
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the tables, write the JSON; exit 1 if a module failed."""
    args = parse(argv)
    if args.markdown:
        sys.stdout.write(markdown(json.loads(args.markdown.read_text(encoding="utf-8"))))
        return 0
    console = Console(width=None if sys.stdout.isatty() else 160)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": machine(),
        "started_at": datetime.now(UTC).isoformat(),
        "benchmarks": {},
    }
    for name, iterations in plan(args).items():
        if iterations is None:
            report["benchmarks"][name] = {"skipped": f"bench/{name}.py is not present"}
            continue
        report["benchmarks"][name] = run_module(name, iterations, console)
    report["duration_seconds"] = round(time.perf_counter() - started, 1)
    report["targets"] = collect_targets(report["benchmarks"])
    if args.iterations == 1:  # one call proves the code runs, not where a target stands
        report["smoke"] = True
        for target in report["targets"]:
            target["met"] = None
    render(report, console)
    output = args.output or RESULTS / ("quick.json" if args.iterations == 1 else "latest.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"wrote {output} in {report['duration_seconds']} s")
    return 1 if any("error" in result for result in report["benchmarks"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
