"""The poisoning checks' score on public attack sets: recall per attack type, false positives on benign tools.

``python -m bench.poisoning_score`` runs ``baton.gateway.replay.poisoning.scan`` over the sets recorded in
tests/data/poisoning/ (``python -m bench.poisoning_sets`` records them) and over the 36 real servers'
498 tools (tests/gateway/data/coverage-tool-definitions.json), and prints the table docs/gateway.md
carries. ``--write`` also records the figures in tests/data/poisoning/score.json, the floor
tests/gateway/test_poisoning_score.py holds CI to.

An attack is caught when the scan gives a finding on one of its tools, scanned the way a replay scans
them: on its server, beside the set's other servers as live adapters. A benign tool is a false positive
when the scan gives any finding on it. Every case falls on one side of a fixed split by the hash of its
id: the checks were tuned on the ``tuning`` side only, and the ``held-out`` side says how they generalize.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "poisoning"
SETS = ("mcp-safetybench", "cisco-mcp-scanner", "msb")
REAL = ROOT / "tests" / "gateway" / "data" / "coverage-tool-definitions.json"
SCORE = DATA / "score.json"
#: Attack types whose payload is not in any tool definition (Cisco's are in the server's code): a scan of
#: definitions cannot see them by construction, so they are listed apart and kept out of the headline.
CODE_BORNE = frozenset(
    {
        "arbitrary-resource-read-write", "backdoor", "data-exfiltration", "defense-evasion",
        "general-description-code-mismatch", "goal-manipulation", "injection-attacks",
        "resource-exhaustion", "template-injection", "tool-poisoning", "unauthorized-code-execution",
        "unauthorized-network-access", "unauthorized-system-access",
    }
)  # fmt: skip
SIDES = ("tuning", "held-out")


def side(case_id: str) -> str:
    """The fixed split: about three in ten cases are held out, by the hash of the id alone."""
    return "held-out" if int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % 10 < 3 else "tuning"


@functools.cache
def _scan() -> Callable[..., list[dict[str, Any]]]:
    """The checks of this checkout (its src/ first, as the other benchmarks import it)."""
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    from baton.gateway.replay.poisoning import scan

    return scan


def _flagged(definitions: list[dict[str, Any]], server: str, others: dict[str, str]) -> set[str]:
    """The names of the tools the scan finds something on."""
    return {f["tool"] for f in _scan()(definitions, adapter_id=server, other_tools=others)}


def _live(servers: dict[str, list[dict[str, Any]]], but: str) -> dict[str, str]:
    return {t["name"]: name for name, tools in servers.items() if name != but for t in tools}


def attack_results(recorded: dict[str, Any]) -> Iterator[tuple[str, str, str, bool]]:
    """(type, id, side, caught) of each attack in one set."""
    servers = recorded["servers"]
    for attack in recorded["attacks"]:
        names = {d["name"] for d in attack["definitions"]}
        server = attack["server"]
        if attack["mode"] == "alone":
            definitions, others = attack["definitions"], {}
        elif attack["mode"] in (
            "beside",
            "instead",
        ):  # a server of its own beside the set's, or one's stand-in
            definitions = attack["definitions"]
            others = _live(servers, attack["benign_server"] if attack["mode"] == "instead" else "")
        else:
            kept = [t for t in servers[server] if attack["mode"] == "add" or t["name"] not in names]
            definitions, others = kept + attack["definitions"], _live(servers, server)
        caught = bool(_flagged(definitions, server, others) & names)
        yield attack["attack_type"], attack["id"], side(attack["id"]), caught


def benign_results(
    servers: dict[str, list[dict[str, Any]]], *, live: bool
) -> Iterator[tuple[str, str, bool]]:
    """(id, side, flagged) of each benign tool, its server scanned alone or beside the others."""
    for server, tools in servers.items():
        flagged = _flagged(tools, server, _live(servers, server) if live else {})
        for tool in tools:
            tool_id = hashlib.sha256(f"{server}\0{tool['name']}".encode()).hexdigest()[:12]
            yield tool_id, side(tool_id), tool["name"] in flagged


def _ratio(hits: int, total: int) -> dict[str, Any]:
    return {"n": total, "hits": hits, "rate": round(hits / total, 4) if total else None}


def _tally(rows: list[tuple[str, bool]]) -> dict[str, Any]:
    """Hits over all rows and over each side of the split."""
    out = {"all": _ratio(sum(hit for _, hit in rows), len(rows))}
    for name in SIDES:
        mine = [hit for s, hit in rows if s == name]
        out[name] = _ratio(sum(mine), len(mine))
    return out


def load(name: str) -> dict[str, Any]:
    """One recorded set."""
    recorded: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return recorded


def score() -> dict[str, Any]:
    """Every figure the docs' table shows, per set and attack type, and the headline over them."""
    result: dict[str, Any] = {"sets": {}}
    headline: list[tuple[str, bool]] = []
    benign_all: list[tuple[str, bool]] = []
    for name in SETS:
        recorded = load(name)
        by_type: dict[str, list[tuple[str, bool]]] = {}
        for kind, _, where, caught in attack_results(recorded):
            by_type.setdefault(kind, []).append((where, caught))
            if kind not in CODE_BORNE:
                headline.append((where, caught))
        benign = [(where, hit) for _, where, hit in benign_results(recorded["servers"], live=True)]
        benign_all += benign
        result["sets"][name] = {
            "source": recorded["source"],
            "recall": {kind: _tally(rows) for kind, rows in sorted(by_type.items())},
            "false_positives": _tally(benign),
        }
    real = {
        s["adapter_id"]: s["tool_definitions"]
        for s in json.loads(REAL.read_text(encoding="utf-8"))["servers"]
    }
    real_alone = [(where, hit) for _, where, hit in benign_results(real, live=False)]
    real_live = [(where, hit) for _, where, hit in benign_results(real, live=True)]
    result["real_servers"] = {"alone": _tally(real_alone), "all_live": _tally(real_live)}
    result["headline"] = {
        "recall": _tally(headline),
        "false_positives": _tally(benign_all + real_alone),
    }
    return result


def _cell(tally: dict[str, Any]) -> str:
    return f"{tally['rate']:.2f} ({tally['hits']}/{tally['n']})" if tally["n"] else "–"


def table(result: dict[str, Any]) -> str:
    """The markdown docs/gateway.md carries."""
    lines = [
        "| set | attack type | cases | recall, tuning | recall, held out | recall, all |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, one in result["sets"].items():
        for kind, tally in one["recall"].items():
            mark = " (in code)" if kind in CODE_BORNE else ""
            cells = " | ".join(_cell(tally[s]) for s in (*SIDES, "all"))
            lines.append(f"| {name} | {kind}{mark} | {tally['all']['n']} | {cells} |")
    head = result["headline"]["recall"]
    lines.append(
        f"| **all** | **in a definition** | {head['all']['n']} | "
        + " | ".join(f"**{_cell(head[s])}**" for s in (*SIDES, "all"))
        + " |"
    )
    lines += [
        "",
        "| benign tools | tools | false positives, tuning | held out | all |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows = [(f"{n} (beside its set's servers)", o["false_positives"]) for n, o in result["sets"].items()]
    rows += [("36 real servers, each alone", result["real_servers"]["alone"])]
    rows += [("36 real servers, all live together", result["real_servers"]["all_live"])]
    rows += [("**all benign** (real servers alone)", result["headline"]["false_positives"])]
    for label, tally in rows:
        lines.append(
            f"| {label} | {tally['all']['n']} | "
            + " | ".join(_cell(tally[s]) for s in (*SIDES, "all"))
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    """Print the table; ``--write`` records the figures CI holds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--write", action="store_true", help=f"record the figures in {SCORE.relative_to(ROOT)}"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of the table")
    options = parser.parse_args()
    result = score()
    if options.write:
        SCORE.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1) if options.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
