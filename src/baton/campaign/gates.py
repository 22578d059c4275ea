"""The campaign's gates, computed from its cases' results (the reference runner's, then baton's own), and
the status they classify the run as."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from baton.campaign.governed import subagent_used_governed_tool

if TYPE_CHECKING:
    from baton.campaign.run_view import Campaign

#: Planted in the parent context the cases hand subagents: no model request or recorded row may hold it.
CANARY = "PRIVATE-MARKER-MUST-BE-FILTERED"
#: The tools the reference runner requires of the server's catalog.
REQUIRED_TOOLS = frozenset(
    {
        "mcp_spawn_subagent",
        "mcp_send_message_to_subagent",
        "mcp_cancel_subagent",
        "mcp_get_subagent_status",
        "mcp_request_admin_approval",
        "mcp_request_admin_input",
        "mcp_send_email",
        "mcp_send_telegram_message",
        "mcp_send_slack_message",
    }
)
#: The gates that need real delivery credentials (a run missing only these is ``blocked``, not ``failed``).
DELIVERY_GATES = frozenset({"real_email_notification", "real_im_notification", "real_slack_notification"})


def classify_status(gates: dict[str, bool], *, interactive_human: bool) -> str:
    """``passed`` when every gate holds; ``blocked`` when only external gates fail; else ``failed``."""
    if all(gates.values()):
        return "passed"
    exempt = set(DELIVERY_GATES)
    if not interactive_human:
        exempt.add("real_human_decision")
    core = [value for name, value in gates.items() if name not in exempt]
    return "blocked" if all(core) else "failed"


def human_decision_accepted(decision: dict[str, Any] | None, result: dict[str, Any]) -> bool:
    """Whether the server accepted the live decision for the same request."""
    return bool(
        decision
        and result.get("success") is True
        and result.get("timeout") is not True
        and result.get("approved") is decision.get("approved")
        and result.get("request_id") == decision.get("request_id")
    )


def notification_readiness(env: dict[str, str]) -> dict[str, bool]:
    """Whether each real-delivery gate has the configuration it needs.

    Email uses baton's own readiness rule (SendGrid, SMTP_HOST, or a login at a mail provider apprise
    knows), so ``--real-notifications`` refuses to start exactly when the server could not send.
    """
    from baton.config import load_settings
    from baton.notify.mail import email_readiness

    email_service = email_readiness(load_settings(env)).ready
    return {
        "email": bool(email_service and env.get("HITL_ADMIN_EMAIL")),
        "telegram": bool(env.get("TELEGRAM_BOT_TOKEN") and env.get("TELEGRAM_DEFAULT_CHAT_ID")),
        "slack": bool(env.get("SLACK_WEBHOOK_URL")),
    }


def timers_fired_and_cancelled(outcome: dict[str, Any], receipts: list[dict[str, Any]]) -> bool:
    """A timer fired (its ``timer_fired`` receipt, succeeded) and one cancelled before its time never did."""
    fired_id = (outcome.get("timer_set") or {}).get("timer_id")
    doomed_id = (outcome.get("timer_doomed") or {}).get("timer_id")
    firings = [r.get("payload") or {} for r in receipts if r.get("kind") == "timer_fired"]
    cancels = [r.get("payload") or {} for r in receipts if r.get("kind") == "timer_cancelled"]
    doomed = outcome.get("timer_doomed_listed") or {}
    return bool(
        fired_id
        and doomed_id
        and any(f.get("timer_id") == fired_id and f.get("outcome") == "succeeded" for f in firings)
        and (outcome.get("timer_cancelled") or {}).get("success") is True
        and any(c.get("timer_id") == doomed_id for c in cancels)
        and not any(f.get("timer_id") == doomed_id for f in firings)
        and doomed.get("status") == "cancelled"
        and doomed.get("fire_count") == 0
    )


def compute_gates(
    c: Campaign, outcome: dict[str, Any], llm_receipts: list[dict[str, Any]], chain: dict[str, Any]
) -> dict[str, bool]:
    """The reference runner's gates, then baton's own."""
    by_case = {row.case: row.payload for row in c.rows}
    approval = outcome.get("approval") or {}
    gates = {
        "real_mcp_catalog_has_required_primitives": c.tool_names >= REQUIRED_TOOLS,
        "two_real_context_strategies_compared": _strategies_compared(by_case),
        "raw_model_usage_latency_receipts": _model_calls_recorded(llm_receipts),
        "sync_async_message_cancel_status_lifecycle": _lifecycle_completed(by_case, outcome),
        "hitl_pending_response_and_conservative_timeout": _hitl_answered_and_timed_out(outcome, approval),
        "real_human_decision": human_decision_accepted(outcome.get("human_decision"), approval),
        "real_email_notification": (outcome.get("email") or {}).get("success") is True,
        "real_im_notification": (outcome.get("telegram") or {}).get("success") is True,
        "real_slack_notification": (outcome.get("slack") or {}).get("success") is True,
        "receipt_chain_verifies": bool(chain.get("ok")) and chain.get("count", 0) > 0,
        "privacy_canary_absent_from_model_requests": _canary_absent(c, CANARY),
        "no_secret_in_bundle": _no_secret(c),
    }
    if "timer_set" in outcome:
        gates["timers_fire_and_cancel"] = timers_fired_and_cancelled(outcome, chain.get("receipts") or [])
    if "adapters" in outcome:
        gates["adapters_listed_with_contracts"] = _adapters_pinned(outcome.get("adapters") or {})
    if "governed" in outcome:
        receipts = chain.get("receipts") or []
        gates["subagent_used_governed_tool"] = subagent_used_governed_tool(
            outcome, receipts, bool(chain.get("ok"))
        )
    return gates


def _strategies_compared(by_case: dict[str, Any]) -> bool:
    """Both context strategies answered, the generated one spent prep tokens and filtered the canary out."""
    minimal, generated = by_case.get("minimal_sync", {}), by_case.get("llm_generated_sync", {})
    return (
        minimal.get("success") is True
        and generated.get("success") is True
        and minimal.get("context_strategy") == "minimal"
        and generated.get("context_strategy") == "llm_generated"
        and (generated.get("prep_tokens") or 0) > 0
        and CANARY not in (generated.get("prepared_context") or "")
    )


def _model_calls_recorded(llm_receipts: list[dict[str, Any]]) -> bool:
    """There were model calls, and each receipt holds the raw response id, the usage and the latency."""
    return bool(llm_receipts) and all(
        row.get("response", {}).get("id")
        and row.get("usage", {}).get("total_tokens") is not None
        and row.get("latency_seconds") is not None
        for row in llm_receipts
    )


def _lifecycle_completed(by_case: dict[str, Any], outcome: dict[str, Any]) -> bool:
    """A follow-up message answered, the async subagent completed, and a cancelled one reads as cancelled."""
    status = outcome.get("async_status") or {}
    return (
        by_case.get("multi_turn_message", {}).get("success") is True
        and status.get("status") == "completed"
        and by_case.get("cancel_subagent", {}).get("success") is True
        and by_case.get("cancelled_status", {}).get("status") == "cancelled"
    )


def _hitl_answered_and_timed_out(outcome: dict[str, Any], approval: dict[str, Any]) -> bool:
    """A pending request got its answer, and one left unanswered timed out as not approved."""
    timeout = outcome.get("timeout") or {}
    return (
        bool(outcome.get("request_id"))
        and approval.get("success") is True
        and approval.get("timeout") is not True
        and timeout.get("timeout") is True
        and timeout.get("approved") is False
    )


def _adapters_pinned(listed: dict[str, Any]) -> bool:
    """The listing answered, and every promoted adapter carries its pinned contract hashes."""
    hashes = ("tool_name_set_sha256", "tool_schema_manifest_sha256", "tool_definition_sha256")
    promoted = [a for a in listed.get("adapters") or [] if a.get("state") == "promoted"]
    return listed.get("success") is True and all(
        all((a.get("contract") or {}).get(key) for key in hashes) for a in promoted
    )


def _canary_absent(c: Campaign, canary: str) -> bool:
    log = c.run_dir / "model_requests.jsonl"
    if not log.is_file():
        return False
    text = log.read_text(encoding="utf-8")
    return (
        bool(text.strip()) and canary not in text and all(canary not in json.dumps(r.payload) for r in c.rows)
    )


def _no_secret(c: Campaign) -> bool:
    from baton.evidence.receipts import CREDENTIAL_PATTERN

    for path in c.run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if CREDENTIAL_PATTERN.search(text) or any(
                s in text for s in c.bundle.sensitive_values if len(s) >= 8
            ):
                return False
    return True
