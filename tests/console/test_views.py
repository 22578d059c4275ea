"""The console's drift view over real replay receipt files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from baton.console.views import drift

pytestmark = pytest.mark.anyio


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


async def test_subagent_tokens_are_the_sum_of_its_model_call_receipts(model_env: dict[str, str]) -> None:
    from baton.config import load_settings
    from baton.console.views import subagents
    from baton.runtime import Runtime
    from tests.conftest import call, stdio_session

    async with stdio_session(model_env) as session:
        spawned = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": "Summarise the quarter",
                "context_strategy": "llm_generated",
                "parent_context": {"quarter": "Q3", "revenue": 12},
                "business_rules": "Only the quarter.",
            },
        )
    assert spawned["success"] is True and spawned["prep_tokens"] > 0, spawned
    runtime = Runtime.open(load_settings(model_env))
    try:
        spent = sum(
            receipt.payload["usage"]["total_tokens"]
            for receipt in runtime.receipts.list(kind="model_call", limit=100)
            if receipt.payload.get("subagent_id") == spawned["subagent_id"]
        )
        shown = next(row for row in subagents(runtime) if row["subagent_id"] == spawned["subagent_id"])
    finally:
        runtime.close()
    assert shown["total_tokens"] == spent > spawned["prep_tokens"]
