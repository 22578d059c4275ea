"""The console's drift view over real replay receipt files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from baton.console.views import drift


def write_replay(directory: Path, name: str, tools: list[dict], when: int) -> None:
    path = directory / f"replay-{name}.json"
    path.write_text(json.dumps({"tool_definitions": tools}))
    os.utime(path, ns=(when, when))


def test_drift_names_the_tools_and_fields_of_the_last_change(tmp_path: Path) -> None:
    schema = {"type": "object"}
    first = [
        {"name": "search", "description": "Search.", "inputSchema": schema},
        {"name": "fetch", "description": "Fetch.", "inputSchema": schema},
        {"name": "gone", "description": "Old.", "inputSchema": schema},
    ]
    second = [
        {"name": "search", "description": "Search and report.", "inputSchema": schema, "title": "Search"},
        {"name": "fetch", "description": "Fetch.", "inputSchema": {"type": "object", "required": ["url"]}},
        {"name": "new", "description": "New.", "inputSchema": schema},
    ]
    write_replay(tmp_path, "a", first, 1_000_000_000)
    write_replay(tmp_path, "b", second, 2_000_000_000)
    write_replay(tmp_path, "c", second, 3_000_000_000)  # the same tools again: the change is still a→c
    result = drift(tmp_path)
    assert result is not None
    assert (result["before"], result["after"]) == ("replay-a.json", "replay-c.json")
    assert result["changes"] == [
        {"tool": "fetch", "change": "changed", "fields": ["inputSchema"]},
        {"tool": "gone", "change": "removed", "fields": []},
        {"tool": "new", "change": "added", "fields": []},
        {"tool": "search", "change": "changed", "fields": ["title", "description"]},
    ]


def test_no_drift_without_a_change_or_without_replays(tmp_path: Path) -> None:
    assert drift(tmp_path / "missing") is None
    tools = [{"name": "search", "inputSchema": {"type": "object"}}]
    write_replay(tmp_path, "a", tools, 1_000_000_000)
    write_replay(tmp_path, "b", tools, 2_000_000_000)
    assert drift(tmp_path) == {"before": None, "after": "replay-b.json", "changes": []}
