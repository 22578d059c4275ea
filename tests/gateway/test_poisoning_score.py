"""The poisoning checks' score on public attack sets cannot fall: recall and false positives are held to the
figures ``python -m bench.poisoning_score --write`` recorded in tests/data/poisoning/score.json, and the table
docs/gateway.md shows is the one that command prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.poisoning_score import SCORE, SETS, SIDES, load, score
from bench.poisoning_sets import tools_in_source

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "gateway.md"
RECORDED: dict[str, Any] = json.loads(SCORE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return score()


def test_the_score_command_prints_the_table_docs_gateway_md_carries() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.poisoning_score"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = done.stdout.strip()
    assert table.startswith("| set | attack type |")
    assert table in DOCS.read_text(encoding="utf-8"), (
        "rerun python -m bench.poisoning_score --write and paste it"
    )


def test_recall_on_attacks_in_a_definition_and_false_positives_hold_the_recorded_level(
    now: dict[str, Any],
) -> None:
    for side in (*SIDES, "all"):
        recall, recorded = now["headline"]["recall"][side], RECORDED["headline"]["recall"][side]
        assert recall["n"] == recorded["n"] and recall["hits"] >= recorded["hits"], side
        false, recorded = (
            now["headline"]["false_positives"][side],
            RECORDED["headline"]["false_positives"][side],
        )
        assert false["n"] == recorded["n"] and false["hits"] <= recorded["hits"], side


def test_no_attack_type_and_no_benign_set_does_worse_than_recorded(now: dict[str, Any]) -> None:
    for name, recorded in RECORDED["sets"].items():
        for kind, tally in recorded["recall"].items():
            assert now["sets"][name]["recall"][kind]["all"]["hits"] >= tally["all"]["hits"], (name, kind)
        assert (
            now["sets"][name]["false_positives"]["all"]["hits"] <= recorded["false_positives"]["all"]["hits"]
        )
    for view in ("alone", "all_live"):
        assert now["real_servers"][view]["all"]["hits"] <= RECORDED["real_servers"][view]["all"]["hits"], view


def test_the_held_out_cases_pass_mcpproxys_gate(now: dict[str, Any]) -> None:
    assert now["headline"]["recall"]["held-out"]["rate"] >= 0.90
    assert now["headline"]["false_positives"]["held-out"]["rate"] <= 0.05
    assert now["headline"]["false_positives"]["all"]["rate"] <= 0.05


def test_a_sets_tools_are_read_from_its_source_without_running_it() -> None:
    source = (
        'raise SystemExit("never run")\n'
        "@mcp.tool()\n"
        "async def find(query: str, ctx: Context, limit: Optional[int] = 5) -> str:\n"
        '    """Finds things.\n\n    Args:\n        query: what to find\n    """\n'
        "def helper() -> None:\n"
        '    """Not a tool."""\n'
    )
    assert tools_in_source(source) == [
        {
            "name": "find",
            "description": "Finds things.\n\nArgs:\n    query: what to find",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"title": "Query", "type": "string"},
                    "limit": {"title": "Limit", "type": "integer"},
                },
                "required": ["query"],
            },
        }
    ]


@pytest.mark.parametrize("name", SETS)
def test_each_recorded_set_names_its_source_and_licence_and_its_cases_are_distinct(name: str) -> None:
    recorded = load(name)
    assert recorded["source"]["commit"] and recorded["source"]["licence"]
    ids = [attack["id"] for attack in recorded["attacks"]]
    assert len(ids) == len(set(ids)) and all(attack["definitions"] for attack in recorded["attacks"])
