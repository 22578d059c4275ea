"""``baton gateway diff``: the tools added, removed and changed between the served version and the next."""

from __future__ import annotations

import difflib
import json
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy import state
from baton.gateway.policy.contract import DEFINITION_FIELDS
from baton.gateway.policy.policy_files import policy_path
from baton.runtime import Runtime


def _pretty(definition: dict[str, Any]) -> list[str]:
    """Canonical JSON (sorted keys) one member a line, so a unified diff shows what moved."""
    return json.dumps(definition, sort_keys=True, indent=2, ensure_ascii=False).splitlines()


def tool_diff(served: list[dict[str, Any]], following: list[dict[str, Any]]) -> dict[str, Any]:
    """Names added and removed, the fields changed per tool, and a unified diff of the canonical JSON."""
    old = {d["name"]: d for d in served if isinstance(d, dict) and isinstance(d.get("name"), str)}
    new = {d["name"]: d for d in following if isinstance(d, dict) and isinstance(d.get("name"), str)}
    changed: dict[str, list[str]] = {}
    for name in sorted(set(old) & set(new)):
        fields = [f for f in DEFINITION_FIELDS if old[name].get(f) != new[name].get(f)]
        if fields:
            changed[name] = fields
    unified: list[str] = []
    for name in sorted(set(old) | set(new)):
        if name in old and name in new and name not in changed:
            continue
        before = _pretty(old[name]) if name in old else []
        after = _pretty(new[name]) if name in new else []
        unified += difflib.unified_diff(
            before, after, f"served/{name}.json", f"next/{name}.json", lineterm="", n=3
        )
    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": changed,
        "unified": "\n".join(unified),
    }


def _definitions(runtime: Runtime, adapter_id: str, sha: str | None) -> list[dict[str, Any]]:
    from baton.gateway.policy.state import replay_receipt

    if not sha:
        return []
    receipt = replay_receipt(runtime, adapter_id, sha)
    if receipt is None:
        raise GatewayError(
            "artifact_receipt_chain_invalid", f"The replay receipt {sha[:12]}… of {adapter_id} is missing."
        )
    definitions = receipt.get("tool_definitions")
    return definitions if isinstance(definitions, list) else []


def adapter_diff(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """The served version's tools against the last replay's (the next version); nothing served: all added."""
    from baton.gateway.policy.bookkeeping import identify

    adapter_id, _ = identify(policy_path(runtime.settings, adapter))
    row = state.get_adapter(runtime, adapter_id)
    if row is None or not row.get("replay_receipt_sha256"):
        raise GatewayError(
            "adapter_contract_unpinned",
            f"Adapter {adapter_id} has no replay to compare; run baton gateway replay {adapter_id} --apply.",
        )
    served_sha = row.get("serving_replay_receipt_sha256") if state.is_live(row) else None
    result = tool_diff(
        _definitions(runtime, adapter_id, served_sha),
        _definitions(runtime, adapter_id, row["replay_receipt_sha256"]),
    )
    return {
        "adapter_id": adapter_id,
        "served_replay_receipt_sha256": served_sha,
        "next_replay_receipt_sha256": row["replay_receipt_sha256"],
        **result,
    }


def summary_lines(diff: dict[str, Any]) -> list[str]:
    """A human view: one line of names, then the unified diff."""
    if not (diff["added"] or diff["removed"] or diff["changed"]):
        return ["tools: no change from the served version"]
    changed = ", ".join(f"{name} ({', '.join(fields)})" for name, fields in diff["changed"].items())
    lines = [
        f"tools added: {', '.join(diff['added']) or 'none'}; removed: {', '.join(diff['removed']) or 'none'}; "
        f"changed: {changed or 'none'}"
    ]
    return lines + (diff["unified"].splitlines() if diff["unified"] else [])
