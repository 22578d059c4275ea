"""The campaign's governed-subagent case and its gate ``subagent_used_governed_tool``.

Before the server starts, the campaign locks, verifies, replays and promotes the stdlib test MCP server
(:mod:`baton.testing.mcp_stdio_server`, served by a loopback npm registry) in its own store as adapter
``campaign``: ``echo`` allowed, ``transfer`` allowed behind an approval. The case spawns a subagent with
those two tools; the automated operator approves the gated call; the gate reads the receipt chain.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

from baton.campaign.options import CASE_GUARD_SECONDS, POLL_SECONDS

ADAPTER_ID = "campaign"
ECHO, TRANSFER = f"{ADAPTER_ID}__echo", f"{ADAPTER_ID}__transfer"
ECHO_TEXT = "governed hello from the campaign"
TRANSFER_ARGUMENTS = {"to": "campaign-ledger", "amount": 1}
#: The task names the tools and arguments, so a real model does what the loopback model is scripted to.
TASK = (
    "GOVERNED-TOOL-CASE. First call the tool campaign__echo with text "
    f"'{ECHO_TEXT}'. Then call campaign__transfer with to='campaign-ledger' and amount=1. "
    "Then report both results in one sentence."
)


class Caller(Protocol):
    """What the case needs of the campaign: a recorded tool call."""

    async def call(self, case: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool and record the row."""
        ...


def governed_script() -> Any:
    """What the loopback model answers the case's task with: the plain call, then the gated one."""
    from baton.testing import Behavior, ToolCall

    rounds = [[ToolCall(ECHO, {"text": ECHO_TEXT})], [ToolCall(TRANSFER, dict(TRANSFER_ARGUMENTS))]]
    return Behavior(tool_rounds=rounds, after_tools="Both tools answered: {tool_results}")


def prepare_adapter(home: Path) -> str | None:
    """Make adapter ``campaign`` live in the campaign's store; the reason when it cannot be (no sandbox)."""
    if shutil.which("bwrap") is None and shutil.which("docker") is None:
        return "no sandbox (bubblewrap or docker) on this machine"
    from baton.config import load_settings
    from baton.runtime import Runtime
    from baton.testing.gateway_adapter import document, make_live, publish, tool
    from baton.testing.npm_registry import NpmRegistryServer

    tools = [tool("echo", text="string"), tool("transfer", to="string", amount="integer")]
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(home), "BATON_NPM_REGISTRY": registry.url}))
        try:
            make_live(
                runtime,
                document(ADAPTER_ID, publish(registry), tools),
                allowed=["echo", "transfer"],
                approval_required=["transfer"],
                approval_timeout_seconds=300,
            )
        finally:
            runtime.close()
    return None


async def governed_case(c: Caller) -> dict[str, Any]:
    """Spawn a subagent with one plain and one gated adapter tool; approve the gated call; wait for it."""
    spawned = await c.call(
        "governed_subagent_spawn",
        "mcp_spawn_subagent",
        {"task": TASK, "tools": [ECHO, TRANSFER], "mode": "async"},
    )
    subagent_id = spawned.get("subagent_id")
    request_id = None
    approval: dict[str, Any] = {}
    if subagent_id:
        deadline = time.monotonic() + CASE_GUARD_SECONDS
        for attempt in itertools.count(1):
            status = await c.call(
                f"governed_status_{attempt}", "mcp_get_subagent_status", {"subagent_id": subagent_id}
            )
            request_id = status.get("waiting_request_id")
            if request_id or status.get("status") not in ("queued", "running") or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_SECONDS)
    if request_id:
        approval = await c.call(
            "governed_operator_approval",
            "mcp_respond_to_request",
            {
                "request_id": request_id,
                "approved": True,
                "admin_notes": "Approved by the automated validation operator; not a claimed human judgment.",
            },
        )
    final: dict[str, Any] = {}
    if subagent_id:
        deadline = time.monotonic() + CASE_GUARD_SECONDS
        for attempt in itertools.count(1):
            final = await c.call(
                f"governed_final_{attempt}", "mcp_get_subagent_status", {"subagent_id": subagent_id}
            )
            if final.get("status") not in ("queued", "running") or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_SECONDS)
    return {"governed": {"spawn": spawned, "request_id": request_id, "approval": approval, "final": final}}


def subagent_used_governed_tool(
    outcome: dict[str, Any], receipts: list[dict[str, Any]], chain_ok: bool
) -> bool:
    """The model's plain call reached the sandboxed upstream; the gated call waited for a decision; the
    receipts link spawn → model call → tool call → decision; the chain verifies."""
    governed = outcome.get("governed") or {}
    subagent_id = (governed.get("spawn") or {}).get("subagent_id")
    request_id = governed.get("request_id")
    if not (subagent_id and request_id and chain_ok):
        return False
    by_seq = {r.get("seq"): r for r in receipts}
    spawned = [
        r
        for r in receipts
        if r.get("kind") == "subagent_spawned" and (r.get("payload") or {}).get("subagent_id") == subagent_id
    ]
    calls = [
        r.get("payload") or {}
        for r in receipts
        if r.get("kind") == "gateway_call"
        and ((r.get("payload") or {}).get("subagent") or {}).get("subagent_id") == subagent_id
    ]
    echo = [p for p in calls if p.get("tool") == "echo" and p.get("success") is True]
    transfer = [p for p in calls if p.get("tool") == "transfer" and p.get("success") is True]
    if len(spawned) != 1 or not echo or not transfer:
        return False

    def linked(payload: dict[str, Any]) -> bool:
        link = payload.get("subagent") or {}
        model = by_seq.get((link.get("model_call_receipt") or {}).get("seq")) or {}
        return (
            (link.get("spawn_receipt") or {}).get("sha256") == spawned[0].get("sha256")
            and model.get("kind") == "model_call"
            and (model.get("payload") or {}).get("subagent_id") == subagent_id
            and model.get("sha256") == (link.get("model_call_receipt") or {}).get("sha256")
        )

    approval = transfer[0].get("approval") or {}
    decision = by_seq.get(approval.get("decision_receipt_seq")) or {}
    return (
        linked(echo[0])
        and linked(transfer[0])
        and approval.get("request_id") == request_id
        and decision.get("kind") == "hitl_decided"
        and (decision.get("payload") or {}).get("request_id") == request_id
        and decision.get("sha256") == approval.get("decision_receipt_sha256")
        and (governed.get("final") or {}).get("status") == "completed"
    )
