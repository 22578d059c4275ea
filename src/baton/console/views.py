"""What each console page shows, read from the store through the subsystems' own services.

Every function takes the runtime and returns plain dicts for the templates; nothing here knows
about HTTP. Values come from rows that were redacted before they were written (SPEC section 4).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from baton.errors import BatonError
from baton.runtime import Runtime
from baton.store.schema import hitl_requests
from baton.store.schema import receipts as receipts_table

log = logging.getLogger("baton.console")

#: Who stands behind each decision path (``decided_via``).
DECIDERS = {
    "passkey": "logged in with a passkey",
    "admin_token": "the operator's BATON_ADMIN_TOKEN",
    "inbox": "in the web inbox (before people were named)",
    "link": "whoever held a signed link",
    "cli": "with baton hitl, as this OS user",
    "elicitation": "an MCP client's own form (elicitation)",
    "mcp": "an MCP client with decision authority",
    "mcp_admin": "an MCP caller with the admin credential",
    "console": "in the console",
}
#: Tool-definition fields whose change is drift (SPEC section 6).
TOOL_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 1)
    except (TypeError, ValueError):  # a damaged timestamp: no duration, not a failed page
        return None


def receipts_of(runtime: Runtime, *kinds: str, limit: int = 5000) -> list[dict[str, Any]]:
    """The newest receipts of some kinds, oldest first: ``{seq, kind, at, sha256, payload}``."""
    query = (
        select(receipts_table)
        .where(receipts_table.c.kind.in_(kinds))
        .order_by(receipts_table.c.seq.desc())
        .limit(limit)
    )
    with runtime.store.read() as connection:
        rows = connection.execute(query).all()
    return [
        {"seq": r.seq, "kind": r.kind, "at": r.at, "sha256": r.sha256, "payload": _payload(r.payload)}
        for r in reversed(rows)
    ]


def _payload(text: Any) -> dict[str, Any]:
    """A stored payload; a damaged one is shown as such (``receipts verify`` names it), never a failed page."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"unreadable_payload": True}


# requests ---------------------------------------------------------------------------------------


#: When a closed request was closed: its decision, else (an expiry) its deadline; ISO UTC strings sort in time.
_decided_at = func.coalesce(hitl_requests.c.responded_at, hitl_requests.c.expires_at)


def requests(runtime: Runtime, limit: int = 100) -> dict[str, list[dict[str, Any]]]:
    """Pending requests (the inbox's list) and the latest decided ones with who, path, notes and receipt."""
    from baton.hitl.broker import get_broker
    from baton.hitl.pending_page import LIST_COLUMNS
    from baton.hitl.records import screen_requests

    broker = get_broker(runtime)
    pending = broker.list_pending()
    query = (
        select(*LIST_COLUMNS)
        .where(hitl_requests.c.status != "pending")
        .order_by(_decided_at.desc(), hitl_requests.c.id)
        .limit(limit)
    )
    with runtime.store.read() as connection:
        rows = broker.with_approvals(
            screen_requests(connection.execute(query).all()).rows
        )  # corrupted rows left out
    decided_receipts = {r["payload"].get("request_id"): r for r in receipts_of(runtime, "hitl_decided")}
    decided = []
    for row in rows:
        receipt = decided_receipts.get(row["request_id"])
        via = row["decided_via"]
        decided.append(
            {
                **row,
                "who": row["decided_by"] or ("nobody (expired)" if not via else "unnamed"),
                "path": DECIDERS.get(via or "", via) if via else "expiry",
                "waited_seconds": _seconds_between(row["created_at"], row["responded_at"]),
                "receipt_seq": receipt["seq"] if receipt else None,
                "receipt_sha256": receipt["sha256"] if receipt else None,
            }
        )
    return {"pending": pending, "decided": decided}


# subagents --------------------------------------------------------------------------------------


def subagent_runner(runtime: Runtime) -> Any:
    """The server's subagent runner (or one over the store, for ``baton console``)."""
    runner = runtime.services.get("subagents")
    if runner is None:
        from baton.subagents.runner import SubagentRunner

        runner = SubagentRunner(runtime)
    return runner


def model_calls_by_subagent(runtime: Runtime) -> dict[str, dict[str, float]]:
    """Per subagent: model calls, total latency (seconds) and tokens, from the model-call receipts."""
    totals: dict[str, dict[str, float]] = {}
    for receipt in receipts_of(runtime, "model_call"):
        payload = receipt["payload"]
        subagent = payload.get("subagent_id")
        if not subagent:
            continue
        entry = totals.setdefault(subagent, {"calls": 0, "latency_seconds": 0.0, "tokens": 0})
        entry["calls"] += 1
        entry["latency_seconds"] += float(payload.get("latency_seconds") or 0)
        entry["tokens"] += int((payload.get("usage") or {}).get("total_tokens") or 0)
    return totals


def subagent_tool_calls(runtime: Runtime, subagent_id: str) -> list[dict[str, Any]]:
    """A governed subagent's tool calls in order, each with the receipts it links (model call, decision)."""
    needle = f'%"subagent_id":"{subagent_id}"%'
    query = (
        select(receipts_table)
        .where(
            receipts_table.c.kind.in_(("gateway_call", "tool_call")), receipts_table.c.payload.like(needle)
        )
        .order_by(receipts_table.c.seq)
    )
    with runtime.store.read() as connection:
        rows = connection.execute(query).all()
    calls = []
    for row in rows:
        payload = json.loads(row.payload)
        link = payload.get("subagent") or {}
        if link.get("subagent_id") != subagent_id:
            continue
        tool = payload["tool"] if row.kind == "tool_call" else f"{payload['adapter_id']}__{payload['tool']}"
        approval = payload.get("approval") or {}
        calls.append(
            {
                "seq": row.seq,
                "at": row.at,
                "tool": tool,
                "success": payload.get("success"),
                "error_class": payload.get("error_class"),
                "duration_seconds": payload.get("duration_seconds"),
                "arguments_sha256": payload.get("arguments_sha256"),
                "model_call_seq": (link.get("model_call_receipt") or {}).get("seq"),
                "request_id": approval.get("request_id"),
                "decision_seq": approval.get("decision_receipt_seq"),
            }
        )
    return calls


def subagents(runtime: Runtime, status: str | None = None) -> list[dict[str, Any]]:
    """Subagents, newest first, with turns, tokens and model latency."""
    runner = subagent_runner(runtime)
    calls = model_calls_by_subagent(runtime)
    rows = []
    for listed in runner.list(status or None, limit=200):
        try:
            detail = runner.status(listed["subagent_id"])
        except (BatonError, TypeError, ValueError, KeyError):
            log.warning("subagent %s cannot be read; left out of the console", listed["subagent_id"])
            continue
        model = calls.get(listed["subagent_id"], {})
        rows.append(
            {
                **detail,
                # every model call of the subagent (preparation and turns), as its receipts say
                "total_tokens": int(model.get("tokens", 0)),
                "model_calls": int(model.get("calls", 0)),
                "latency_seconds": round(model.get("latency_seconds", 0.0), 2),
                "active": detail["status"] in ("queued", "running"),
            }
        )
    return rows


def subagent(runtime: Runtime, subagent_id: str) -> dict[str, Any]:
    """One subagent with its prepared context and whole conversation (stored redacted)."""
    from sqlalchemy import select as sql_select

    from baton.store.schema import subagents as subagents_table

    runner = subagent_runner(runtime)
    detail = runner.status(subagent_id)
    with runtime.store.read() as connection:
        prepared = connection.execute(
            sql_select(subagents_table.c.prepared_context).where(subagents_table.c.id == subagent_id)
        ).scalar_one()
    model = model_calls_by_subagent(runtime).get(subagent_id, {})
    return {
        **detail,
        "prepared_context": prepared,
        "messages": runner.history(subagent_id),
        "tool_calls": subagent_tool_calls(runtime, subagent_id),
        "model_calls": int(model.get("calls", 0)),
        "latency_seconds": round(model.get("latency_seconds", 0.0), 2),
        "active": detail["status"] in ("queued", "running"),
    }


# timers -----------------------------------------------------------------------------------------


def timers(runtime: Runtime) -> list[dict[str, Any]]:
    """Every timer with its next and last firing and the missed flag, active ones first."""
    rows: list[dict[str, Any]] = timer_service(runtime).list()
    order = {"active": 0, "completed": 1, "cancelled": 2}
    return sorted(rows, key=lambda r: (order.get(r["status"], 3), r["next_fire_at"] or "", r["created_at"]))


def timer_service(runtime: Runtime) -> Any:
    """The server's timer service (or one over the store, for ``baton console``)."""
    service = runtime.services.get("timers")
    if service is None:
        from baton.timers.service import TimerService

        service = TimerService(runtime)
    return service


# adapters ---------------------------------------------------------------------------------------


def adapters(runtime: Runtime) -> list[dict[str, Any]]:
    """Every adapter: state, pinned hashes, tool partition, last replay, block reason and drift."""
    from baton.gateway.policy.bookkeeping import list_view
    from baton.gateway.policy.policy_files import load_policy
    from baton.gateway.policy.state import adapter_dir, get_adapter, served_contract

    replays = {}
    for receipt in receipts_of(runtime, "gateway_replay"):
        replays[receipt["payload"].get("adapter_id")] = receipt
    result = []
    for row in list_view(runtime):
        stored = get_adapter(runtime, row["adapter_id"]) or {}
        tools: dict[str, list[str]] = {"allowed": [], "denied": [], "approval_required": []}
        contract = served_contract(stored)
        try:
            policy, _checksum = load_policy(Path(row["policy_path"]), check_expiry=False)
            tools = {
                "allowed": sorted(policy.tools.allowed),
                "denied": sorted(policy.tools.denied),
                "approval_required": sorted(policy.tools.approval_required),
            }
            if contract is None and policy.contract is not None:
                contract = policy.contract.model_dump()
        except BatonError:  # a policy that no longer loads is shown by its state and block reason
            contract = contract or None
        result.append(
            {
                **row,
                "contract": contract,
                "tools": tools,
                "last_replay": replays.get(row["adapter_id"]),
                "drift": drift(adapter_dir(runtime, row["adapter_id"]) / "receipts"),
                "next_diff": next_diff(runtime, stored),
            }
        )
    return result


def next_diff(runtime: Runtime, row: dict[str, Any]) -> dict[str, Any] | None:
    """For a live adapter whose next version has replayed: its tools against the served ones (else None)."""
    from baton.gateway.policy.state import is_live
    from baton.gateway.serving.diff import adapter_diff

    if not row or not is_live(row) or not row.get("replay_receipt_sha256"):
        return None
    if row.get("replay_receipt_sha256") == row.get("serving_replay_receipt_sha256"):
        return None
    try:
        return adapter_diff(runtime, row["id"])
    except BatonError:
        return None


def _observed_tools(path: Path) -> dict[Any, dict[str, Any]] | None:
    try:
        definitions = json.loads(path.read_text(encoding="utf-8")).get("tool_definitions")
    except (OSError, ValueError):
        return None
    if not isinstance(definitions, list):
        return None
    return {d.get("name"): d for d in definitions if isinstance(d, dict)}


def drift(directory: Path) -> dict[str, Any] | None:
    """The last change in the observed tools: which tools, and which of their fields, differ between the
    newest replay and the latest earlier replay that observed something else (None: never changed)."""
    if not directory.is_dir():
        return None
    files = sorted(directory.glob("replay-*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))
    observed = [(path.name, tools) for path in files if (tools := _observed_tools(path)) is not None]
    if not observed:
        return None
    after_name, after = observed[-1]
    earlier = next(((name, tools) for name, tools in reversed(observed[:-1]) if tools != after), None)
    if earlier is None:
        return {"before": None, "after": after_name, "changes": []}
    before_name, before = earlier
    changes: list[dict[str, Any]] = []
    for name in sorted(set(before) | set(after), key=str):
        if name not in before:
            changes.append({"tool": name, "change": "added", "fields": []})
        elif name not in after:
            changes.append({"tool": name, "change": "removed", "fields": []})
        else:
            fields = [f for f in TOOL_FIELDS if before[name].get(f) != after[name].get(f)]
            if fields:
                changes.append({"tool": name, "change": "changed", "fields": fields})
    return {"before": before_name, "after": after_name, "changes": changes}


# receipts ---------------------------------------------------------------------------------------


def receipt_kinds(runtime: Runtime) -> list[str]:
    """Every kind present in the chain."""
    with runtime.store.read() as connection:
        return [k for (k,) in connection.execute(select(receipts_table.c.kind).distinct().order_by("kind"))]


def receipts(
    runtime: Runtime, kind: str | None, since: str | None, until: str | None, limit: int = 200
) -> list[dict[str, Any]]:
    """The newest receipts matching a kind and a time window (``at`` is ISO 8601 UTC), newest first."""
    query = select(receipts_table).order_by(receipts_table.c.seq.desc()).limit(limit)
    if kind:
        query = query.where(receipts_table.c.kind == kind)
    if since:
        query = query.where(receipts_table.c.at >= since)
    if until:
        query = query.where(receipts_table.c.at <= until)
    with runtime.store.read() as connection:
        rows = connection.execute(query).all()
    return [
        {
            "seq": r.seq,
            "kind": r.kind,
            "at": r.at,
            "sha256": r.sha256,
            "prev_sha256": r.prev_sha256,
            "payload": json.dumps(_payload(r.payload), ensure_ascii=False, sort_keys=True),
        }
        for r in rows
    ]


def chain(runtime: Runtime) -> dict[str, Any]:
    """The chain's verdict as ``baton receipts verify`` gives it (the same checkpoints, from the store's
    table and the file outside it, checked against the same keys) and the latest checkpoints."""
    from baton.evidence.anchor import verify_store
    from baton.evidence.checkpoints import all_checkpoints

    report = verify_store(runtime)
    readable = [
        c for c in all_checkpoints(runtime) if isinstance(c.get("sha256"), str) and type(c.get("seq")) is int
    ]
    latest = sorted(readable, key=lambda c: int(c["seq"]))[-10:]
    return {
        "ok": report.ok,
        "count": report.count,
        "head_sha256": report.head_sha256,
        "first_bad_seq": report.first_bad_seq,
        "reason": report.reason,
        "error_class": report.error_class,
        "verified_checkpoints": report.checkpoints,
        "anchored_seq": report.anchored_seq,
        "checkpoints": latest,
    }
