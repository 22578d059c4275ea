"""Offline policy replay: each ``gateway_call`` receipt's verdict re-derived from what the receipt recorded.

The principal (``agent``), the action (``tool``), the canonical arguments, the adapter policy version
(``policy_checksum``) and the Cedar policy (``call_policy_sha256``), both read back by hash from the
content-addressed archive (:mod:`baton.evidence.policy_archive`, an export's ``policies/``). A receipt
whose recorded verdict differs is a mismatch; a hash the archive cannot find, or arguments the receipt does
not hold (or holds redacted), leaves a call unreplayable, and both are reported by seq.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.canonical import canonical_json, sha256_hex
from baton.evidence.policy_archive import find


@dataclass
class ReplayReport:
    """Calls replayed, the ones whose recorded verdict differs, and the ones replay could not judge."""

    replayed: int = 0
    mismatches: list[str] = field(default_factory=list)
    unreplayable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No recorded verdict differs and every call could be replayed."""
        return not self.mismatches and not self.unreplayable


def replay_receipts(rows: Iterable[Mapping[str, Any]], archive: Path) -> ReplayReport:
    """Replay every ``gateway_call`` of ``rows`` (``{seq, kind, payload}``, payload parsed or as text)."""
    report = ReplayReport()
    for row in rows:
        if row.get("kind") != "gateway_call":
            continue
        stored = row.get("payload")
        payload: Any = json.loads(stored) if isinstance(stored, str) else stored
        seq = row.get("seq")
        try:
            problem = _replay(payload, archive)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = ("unreplayable", f"the receipt is malformed ({type(exc).__name__})")
        if problem is None:
            report.replayed += 1
        elif problem[0] == "mismatch":
            report.mismatches.append(f"seq {seq}: {problem[1]}")
        else:
            report.unreplayable.append(f"seq {seq}: {problem[1]}")
    return report


def _replay(p: Mapping[str, Any], archive: Path) -> tuple[str, str] | None:
    """``None`` when the replayed verdict is the recorded one, else ``(mismatch|unreplayable, why)``."""
    from baton.gateway.policy.policy_files import parse_policy

    document = find(archive, p.get("policy_checksum"), "json")
    if document is None:
        return "unreplayable", f"adapter policy {p.get('policy_checksum')} is not in the archive"
    policy = parse_policy(json.loads(document), check_expiry=False)
    admitted = p["tool"] in policy.tools.allowed
    if admitted != (p.get("error_class") != "tool_denied"):
        recorded = "admitted" if admitted is False else "refused (tool_denied)"
        return "mismatch", f"{p['tool']}: recorded {recorded}, the adapter policy version says otherwise"
    pinned = p.get("call_policy_sha256")
    if pinned != policy.tools.call_policy_sha256:
        return "mismatch", "the receipt's Cedar pin is not the one its adapter policy version pins"
    recorded_verdict = p.get("call_policy_decision")
    if pinned is None or recorded_verdict is None:
        return None  # no Cedar policy, or the call was refused before it was asked
    text = find(archive, pinned, "cedar")
    if text is None:
        return "unreplayable", f"Cedar policy {pinned} is not in the archive"
    arguments = p.get("arguments")
    if not isinstance(arguments, dict) or sha256_hex(canonical_json(arguments)) != p["arguments_sha256"]:
        return "unreplayable", f"{p['tool']}: the receipt holds no arguments that hash to arguments_sha256"
    verdict = derive(text.decode("utf-8"), p["adapter_id"], p["tool"], arguments, p.get("agent"))
    if verdict != recorded_verdict:
        return "mismatch", f"{p['tool']}: recorded {_say(recorded_verdict)}, replay gives {_say(verdict)}"
    return None


def derive(
    text: str, adapter_id: str, tool: str, arguments: dict[str, Any], principal: str | None
) -> dict[str, Any]:
    """The verdict the proxy records for this call under this Cedar policy."""
    from baton.gateway.policy.cedar_policy import DEFAULT_PRINCIPAL, decide

    try:
        decision = decide(text, adapter_id, tool, arguments, principal or DEFAULT_PRINCIPAL)
    except GatewayError as exc:
        effect = "forbid" if exc.error_class == "gateway_policy_forbidden" else "error"
        return {"effect": effect, "approvals": 0, "reasons": list(exc.details.get("reasons") or [])}
    return {"effect": decision.effect, "approvals": decision.approvals, "reasons": decision.reasons}


def _say(verdict: Any) -> str:
    if not isinstance(verdict, Mapping):
        return repr(verdict)
    approvals = f" ({verdict.get('approvals')} approvals)" if verdict.get("effect") == "approval" else ""
    return f"{verdict.get('effect')}{approvals}"


def replay_store(runtime: Any) -> ReplayReport:
    """Replay the store's ``gateway_call`` receipts against this home's policy archive."""
    from sqlalchemy import select

    from baton.evidence.policy_archive import archive_dir
    from baton.store.schema import receipts

    query = (
        select(receipts.c.seq, receipts.c.kind, receipts.c.payload)
        .where(receipts.c.kind == "gateway_call")
        .order_by(receipts.c.seq)
    )
    with runtime.store.read() as connection:
        rows = [
            {"seq": seq, "kind": kind, "payload": payload} for seq, kind, payload in connection.execute(query)
        ]
    return replay_receipts(rows, archive_dir(runtime.settings))


def replay_export(directory: Path) -> ReplayReport:
    """Replay an export's ``gateway_call`` receipts against its ``policies/``."""
    from baton.chain_verify import read_jsonl

    return replay_receipts(read_jsonl(directory / "receipts.jsonl"), directory / "policies")
