"""Shadowing across every live adapter and the built-in tools, keyed by adapter and tool, at promote and at
every start of the proxy.

Replay scans a server's tools against the adapters live then; which adapters are live changes afterwards.
So ``promote`` adds the shadowing findings against the adapters live at that moment to the replay's, and
each must be accepted by id as any finding is (a collision the other adapter accepted for its side at its
promotion is accepted already: either side's acceptance covers the pair). At every start the proxy checks each live adapter's
allowed tools against the others' and baton's own: a finding nobody accepted (not this adapter at its
promotion, nor, for two adapters sharing a name, the other one for its side) refuses the adapter's tools
with ``mcp_tool_poisoning_suspected``, the class promotion refuses with. Both sides of an unaccepted
collision are refused: at start nothing tells which one is the impostor.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy.policy import Policy
from baton.gateway.replay.poisoning import name_findings, shadow_finding_id
from baton.runtime import Runtime

log = logging.getLogger("baton.gateway")

#: How many ``gateway_promote`` receipts, newest first, a start reads for the accepted findings.
PROMOTIONS_READ = 10_000


def findings_at_promote(runtime: Runtime, policy: Policy, receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """The replay's findings and the shadowing ones of the allowed tools (what will be served) against
    the adapters live now, each once, less the collisions the other live adapter already accepted for its
    side at its promotion."""
    from baton.gateway.policy.snapshot import live_adapters

    adapter_id = policy.id
    served_tools = [d for d in receipt.get("tool_definitions") or [] if d.get("name") in policy.tools.allowed]

    others = [live for live in live_adapters(runtime) if live.policy.id != adapter_id]
    pairs = [(live.policy.id, tool) for live in others for tool in live.policy.tools.allowed]
    replayed: list[dict[str, Any]] = list(receipt.get("poisoning_findings") or [])
    now = name_findings(served_tools, adapter_id=adapter_id, other_tools=pairs)
    merged = {f["id"]: f for f in [*replayed, *now]}
    served = {live.policy.id: live.row.get("serving_policy_checksum") for live in others}
    found = _unaccepted(adapter_id, list(merged.values()), accepted_by_promotion(runtime, served), pairs)
    return sorted(found, key=lambda f: (f["tool"], f["kind"], f["where"]))


def accepted_by_promotion(runtime: Runtime, served: Mapping[str, str | None]) -> dict[str, set[str]]:
    """The finding ids each served version (adapter id → its policy checksum) accepted at its promotion."""
    accepted: dict[str, set[str]] = {}
    for receipt in runtime.receipts.newest(kind="gateway_promote", limit=PROMOTIONS_READ):
        adapter_id = str(receipt.payload.get("adapter_id"))
        found = receipt.payload.get("accepted_findings") or []
        fresh = adapter_id in served and adapter_id not in accepted
        if fresh and receipt.payload.get("policy_checksum") == served[adapter_id]:
            accepted[adapter_id] = {f.get("id") for f in found}
    return accepted


def _unaccepted(
    adapter_id: str,
    findings: list[dict[str, Any]],
    accepted: dict[str, set[str]],
    pairs: list[tuple[str, str]],
) -> list[dict[str, Any]]:
    """The findings neither this adapter nor, for a shared name, the other adapter accepted."""
    mine = accepted.get(adapter_id, set())
    open_findings = []
    for finding in findings:
        tool = finding["tool"]
        others = {a for a, n in pairs if n == tool and a != adapter_id}
        mirrored = any(
            finding["id"] == shadow_finding_id(tool, other)
            and shadow_finding_id(tool, adapter_id) in accepted.get(other, set())
            for other in others
        )
        if finding["id"] not in mine and not mirrored:
            open_findings.append(finding)
    return open_findings


def refused_at_start(runtime: Runtime, adapters: Iterable[Any]) -> dict[str, GatewayError]:
    """Each live adapter (the proxy's: ``id``, ``row``, allowed ``definitions``) refused for a shadowing
    finding nobody accepted, with the error its calls answer."""
    served = {a.id: (a.row.get("serving_policy_checksum"), list(a.definitions.values())) for a in adapters}
    pairs = [(adapter_id, str(d.get("name"))) for adapter_id, (_, defs) in served.items() for d in defs]
    accepted = accepted_by_promotion(runtime, {a: checksum for a, (checksum, _) in served.items()})
    refused = {}
    for adapter_id, (_, definitions) in served.items():
        found = name_findings(definitions, adapter_id=adapter_id, other_tools=pairs)
        open_findings = _unaccepted(adapter_id, found, accepted, pairs)
        if open_findings:
            refused[adapter_id] = _suspected(adapter_id, open_findings)
            log.warning("adapter %s: %s", adapter_id, refused[adapter_id].message)
    return refused


def _suspected(adapter_id: str, findings: list[dict[str, Any]]) -> GatewayError:
    listed = "; ".join(f"{f['id']} ({f['tool']}: {f['detail']})" for f in findings[:10])
    return GatewayError(
        "mcp_tool_poisoning_suspected",
        f"Adapter {adapter_id} is not served: at this start its tools shadow others that nobody accepted: "
        f"{listed}. Accept each by id (baton gateway promote {adapter_id} --accept-finding ID), or deny "
        "the tool, or demote the other adapter; then restart baton serve.",
        adapter_id=adapter_id,
        findings=findings,
    )
