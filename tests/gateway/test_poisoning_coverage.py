"""The poisoning scanner over the real tool definitions of the coverage table's servers, offline.

``python -m bench.poisoning_survey`` replayed each server in the sandbox and recorded what it listed in
``data/coverage-tool-definitions.json``; ``--report`` adds each server's findings alone and as if every
surveyed server were live at once. This re-scans them: a scanner change that alters a finding fails here
until the survey's report (and docs/gateway.md, which names every finding) is brought up to date.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.gateway.replay.poisoning import scan

DATA = Path(__file__).parent / "data" / "coverage-tool-definitions.json"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"
SURVEY: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))


def test_the_survey_covers_the_coverage_tables_servers_or_says_which_it_did_not() -> None:
    surveyed = [s["candidate"] for s in SURVEY["servers"]]
    missing = [s["candidate"] for s in SURVEY["not_surveyed"]]
    assert len(surveyed) + len(missing) == 36 and not set(surveyed) & set(missing)
    assert all(s["tool_definitions"] for s in SURVEY["servers"])
    text = DOCS.read_text(encoding="utf-8")
    for candidate in missing:
        assert f"`{candidate.split(':', 1)[1]}`" in text  # the doc says it was not surveyed


@pytest.mark.parametrize("server", SURVEY["servers"], ids=lambda s: s["adapter_id"])
def test_each_servers_findings_are_the_reported_ones(server: dict[str, Any]) -> None:
    alone = scan(server["tool_definitions"], adapter_id=server["adapter_id"])
    assert alone == server["findings_alone"]
    everyone = {
        d["name"]: other["adapter_id"]
        for other in SURVEY["servers"]
        if other is not server
        for d in other["tool_definitions"]
    }
    together = scan(server["tool_definitions"], adapter_id=server["adapter_id"], other_tools=everyone)
    assert together == server["findings_with_all_live"]
    text = DOCS.read_text(encoding="utf-8")
    for finding in together:
        assert f"`{finding['id']}`" in text  # every finding, false positives included, is reported
