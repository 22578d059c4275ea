"""``promote`` / ``demote``: an adapter goes live only on a passing replay that matches its current policy.

Promoting snapshots the version (:mod:`~baton.gateway.policy.snapshot`) and points the row's ``serving_*`` columns
at the snapshot in one store transaction; demoting clears them. A promoted adapter that drifts at run time
is blocked with stage ``runtime``; it stays blocked until a version is locked, verified, replayed and
promoted anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import Receipt
from baton.gateway.policy import state
from baton.gateway.policy.bookkeeping import check_chain, identify
from baton.gateway.policy.operator_lock import operator_lock
from baton.gateway.policy.policy import Contract, Policy
from baton.gateway.policy.policy_files import load_policy, policy_path
from baton.gateway.policy.snapshot import prune_snapshots, serving_columns, snapshot
from baton.gateway.policy.state import is_live, replay_receipt, stage_is_served_version
from baton.runtime import Runtime

RUNTIME_STAGE = "runtime"
CONTRACT_KEYS = (
    "protocol_version",
    "server_name",
    "server_version",
    "tool_count",
    "tool_name_set_sha256",
    "tool_schema_manifest_sha256",
    "tool_definition_sha256",
)


def _refuse(adapter_id: str, reason: str) -> GatewayError:
    return GatewayError(
        "adapter_promotion_refused",
        f"Adapter {adapter_id} cannot be promoted: {reason}",
        adapter_id=adapter_id,
    )


def _check_replay(runtime: Runtime, policy: Policy, checksum: str, row: dict[str, Any]) -> dict[str, Any]:
    """The replay receipt of ``row``, checked against the current policy and its pinned contract."""
    if row["state"] not in ("replayed", "promoted") or not row.get("replay_receipt_sha256"):
        raise _refuse(policy.id, f"its state is {row['state']}; it needs a passing replay first.")
    if row.get("policy_checksum") != checksum:
        raise _refuse(policy.id, "the policy changed since the last replay; replay it again.")
    receipt = replay_receipt(runtime, policy.id, row["replay_receipt_sha256"])
    if receipt is None or receipt.get("status") != "completed_protocol_schema_replay":
        raise _refuse(policy.id, "the replay receipt is missing or does not match the store.")
    if receipt.get("policy_checksum") != checksum:
        raise _refuse(policy.id, "the replay receipt was made under another policy.")
    if policy.contract is None:
        raise _refuse(policy.id, "the policy pins no contract.")
    observed = receipt.get("protocol_observation") or {}
    pinned = policy.contract.model_dump()
    drifted = [key for key in CONTRACT_KEYS if observed.get(key) != pinned[key]]
    if drifted:
        raise _refuse(policy.id, f"the replay observed another contract ({', '.join(drifted)}).")
    return receipt


#: Client features a server may ask of baton at run time that baton does not forward to its own client.
UNFORWARDABLE_CAPABILITIES = ("sampling", "elicitation", "tasks")


def unforwardable(policy: Policy, receipt: dict[str, Any]) -> list[str]:
    """What the allowed tools would need from the client that baton cannot give them at run time.

    Declaring sampling or elicitation invites every tool to send those requests, which the runtime
    would have to refuse; a tool whose ``execution.taskSupport`` is ``required`` cannot run without
    MCP Tasks. Roots are forwarded (the runtime answers them with the pinned ``client.roots``).
    """
    if not policy.tools.allowed:
        return []
    needs = [
        f"the client capability {name!r} (declared in [client])"
        for name in UNFORWARDABLE_CAPABILITIES
        if name in policy.client.capabilities
    ]
    for name, execution in sorted((receipt.get("tool_execution") or {}).items()):
        if name in policy.tools.allowed and execution.get("taskSupport") == "required":
            needs.append(f"MCP Tasks (tool {name} requires them)")
    return needs


@dataclass(frozen=True)
class _Candidate:
    """The version ``promote`` checks and then serves: its policy as replayed, its row and replay receipt."""

    path: Path
    policy: Policy
    checksum: str
    contract: Contract
    row: dict[str, Any]
    receipt: dict[str, Any]


def _replayed_candidate(runtime: Runtime, adapter: str) -> _Candidate:
    """The adapter's current policy, once its chain links up and its last replay matches it."""
    path = policy_path(runtime.settings, adapter)
    adapter_id, _ = identify(path)
    row = state.get_adapter(runtime, adapter_id)
    if row is None:
        raise _refuse(adapter_id, "baton has never locked or replayed it.")
    policy, checksum = load_policy(path)
    check_chain(runtime, policy)
    receipt = _check_replay(runtime, policy, checksum, row)
    assert policy.contract is not None
    return _Candidate(path, policy, checksum, policy.contract, row, receipt)


def _check_serves_something(policy: Policy, serve_nothing: bool) -> None:
    """Refuse an adapter that allows no tool, unless ``serve_nothing`` says that is meant."""
    if not policy.tools.allowed and not serve_nothing:
        raise _refuse(
            policy.id,
            f"it allows no tool, so it would serve nothing. Allow tools first (baton gateway allow {policy.id} "
            f"TOOL… then baton gateway replay {policy.id} --apply), or pass --serve-nothing.",
        )


def _accepted_findings(
    policy: Policy, findings: list[dict[str, Any]], accept_findings: list[str] | None
) -> list[dict[str, Any]]:
    """The tool-poisoning findings (the replay's, and the shadowing ones against the adapters live now)
    the operator accepted; refused while any other stays open."""
    accepted = set(accept_findings or [])
    unknown = sorted(accepted - {f.get("id") for f in findings})
    if unknown:
        raise _refuse(
            policy.id,
            f"--accept-finding names no finding of its last replay or the adapters live now: {', '.join(unknown)}.",
        )
    open_findings = [f for f in findings if f.get("id") not in accepted]
    if open_findings:
        listed = "; ".join(f"{f['id']} ({f['tool']}: {f['detail']})" for f in open_findings[:10])
        raise GatewayError(
            "mcp_tool_poisoning_suspected",
            f"Adapter {policy.id} has {len(open_findings)} tool-poisoning finding(s): {listed}. Read them "
            "(baton gateway diff, the replay receipt) and accept each by id with --accept-finding ID, or "
            "do not promote it.",
            adapter_id=policy.id,
            findings=open_findings,
        )
    return [f for f in findings if f.get("id") in accepted]


def _check_forwardable(policy: Policy, receipt: dict[str, Any]) -> None:
    """Refuse an adapter whose allowed tools may need what baton cannot forward (:func:`unforwardable`)."""
    needs = unforwardable(policy, receipt)
    if needs:
        raise GatewayError(
            "adapter_capability_unforwardable",
            f"Adapter {policy.id} cannot be promoted: its allowed tools may need {'; '.join(needs)}, "
            "which baton does not forward to its own client. Remove the capability (and re-pin) "
            "or deny those tools.",
            adapter_id=policy.id,
            needs=needs,
        )


def _promotion_payload(
    candidate: _Candidate, accepted_findings: list[dict[str, Any]], changes: dict[str, Any]
) -> dict[str, Any]:
    """The ``gateway_promote`` receipt's payload: what goes live, what it replaces and the tools' diff."""
    policy = candidate.policy
    return {
        "policy_checksum": candidate.checksum,
        "replaces_policy_checksum": candidate.row.get("serving_policy_checksum"),
        "replay_receipt_sha256": candidate.row["replay_receipt_sha256"],
        "replay_run_id": candidate.receipt.get("run_id"),
        "contract": candidate.contract.model_dump(),
        "allowed_tools": list(policy.tools.allowed),
        "approval_required": list(policy.tools.approval_required),
        "network": policy.runtime.network,
        "allowed_origins": list(policy.runtime.allowed_origins),
        "mounts": [mount.model_dump(exclude_none=True) for mount in policy.runtime.mounts],
        "constraints": list(policy.resolution.constraints),
        "call_policy_sha256": policy.tools.call_policy_sha256,
        "host_programs": [pin.model_dump() for pin in policy.host_programs],
        "serve_nothing": not policy.tools.allowed,
        "unprefixed": policy.serving.unprefixed,
        "accepted_findings": accepted_findings,
        "tools_diff": {key: changes[key] for key in ("added", "removed", "changed")},
    }


def _record_promotion(runtime: Runtime, candidate: _Candidate, payload: dict[str, Any]) -> Receipt:
    """Append the ``gateway_promote`` receipt and point the row's ``serving_*`` columns at the snapshot."""
    replay_receipt_sha256 = candidate.row["replay_receipt_sha256"]
    contract = candidate.contract.model_dump()  # the row's contract and the served one: the same pin
    return state.record(
        runtime,
        candidate.policy.id,
        state="promoted",
        kind="gateway_promote",
        payload=payload,
        policy_path=candidate.path,
        policy_checksum=candidate.checksum,
        replay_receipt_sha256=replay_receipt_sha256,
        contract=contract,
        **serving_columns(candidate.checksum, replay_receipt_sha256, contract),
    )


def promote(
    runtime: Runtime, adapter: str, *, serve_nothing: bool = False, accept_findings: list[str] | None = None
) -> dict[str, Any]:
    """Make the adapter live; refuses with ``adapter_promotion_refused`` unless the replay matches.

    An adapter that allows no tool would serve nothing: refused unless ``serve_nothing`` says so.
    """
    from baton.gateway.serving.names import check_promotable

    candidate = _replayed_candidate(runtime, adapter)
    _check_serves_something(candidate.policy, serve_nothing)
    check_promotable(runtime, candidate.policy)
    from baton.gateway.serving.shadowing import findings_at_promote

    findings = findings_at_promote(runtime, candidate.policy, candidate.receipt)
    accepted = _accepted_findings(candidate.policy, findings, accept_findings)
    _check_forwardable(candidate.policy, candidate.receipt)
    from baton.gateway.serving.diff import adapter_diff, summary_lines

    changes = adapter_diff(runtime, candidate.policy.id)
    with operator_lock(runtime, candidate.policy.id):
        snapshot(runtime, candidate.policy.id, candidate.path, candidate.checksum)
        payload = _promotion_payload(candidate, accepted, changes)
        stored = _record_promotion(runtime, candidate, payload)
        prune_snapshots(runtime, candidate.policy.id, keep=candidate.checksum)
    return {
        "adapter_id": candidate.policy.id,
        "state": "promoted",
        "receipt_seq": stored.seq,
        **payload,
        "diff_unified": changes["unified"],
        "diff_lines": summary_lines(changes),
        "denied_count": len(candidate.policy.tools.denied),
        "risky_tools": risky_tools(candidate.policy, candidate.receipt),
    }


def risky_tools(policy: Policy, receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """The allowed tools that count as destructive, why, and whether each call waits for a human."""
    from baton.gateway.policy.checks import destructive_reason

    definitions = receipt.get("tool_definitions") or []
    annotations = {str(d.get("name")): d.get("annotations") for d in definitions if isinstance(d, dict)}
    risky = []
    for name in policy.tools.allowed:
        reason = destructive_reason(name, annotations.get(name))
        if reason is not None:
            risky.append({"tool": name, "reason": reason, "approval": name in policy.tools.approval_required})
    return risky


def demote(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """Take a promoted (or run-time blocked) adapter out of service; it goes back to ``replayed``."""
    path = policy_path(runtime.settings, adapter)
    adapter_id, _ = identify(path)
    with operator_lock(runtime, adapter_id):
        return _demote_locked(runtime, adapter_id)


def _demote_locked(runtime: Runtime, adapter_id: str) -> dict[str, Any]:
    """:func:`demote` under the adapter's operator lock: the row read, the receipt, the prune."""
    row = state.get_adapter(runtime, adapter_id)
    if row is None or not is_live(row):
        raise GatewayError(
            "adapter_not_promoted", f"Adapter {adapter_id} is not promoted.", adapter_id=adapter_id
        )
    blocked = row.get("serving_block_reason")
    columns: dict[str, Any] = {"block_reason": row.get("block_reason"), "error_class": row.get("error_class")}
    target: state.State = row["state"]  # a next version in progress keeps its stage
    if stage_is_served_version(row):
        target = "blocked" if blocked else "replayed"
        columns = {
            "block_reason": f"demoted; was {blocked}" if blocked else None,
            "error_class": row.get("serving_error_class") if blocked else None,
        }
    stored = state.record(
        runtime,
        adapter_id,
        state=target,
        kind="gateway_demote",
        payload={"previous_state": row["state"], "policy_checksum": row.get("serving_policy_checksum")},
        policy_path=Path(row["policy_path"]),
        **columns,
        **serving_columns(None, None, None),
    )
    prune_snapshots(runtime, adapter_id, keep=None)
    return {"adapter_id": adapter_id, "state": target, "receipt_seq": stored.seq}


def block_at_runtime(
    runtime: Runtime,
    adapter_id: str,
    error: GatewayError,
    evidence: dict[str, Any],
    policy_checksum: str | None = None,
) -> None:
    """Block a promoted adapter whose upstream drifted (stage ``runtime``), with a failure receipt.

    With ``policy_checksum``, only while that version is the one served (a version already replaced by
    a newer promotion is not blocked in the newer one's place).
    """
    row = state.get_adapter(runtime, adapter_id)
    if row is None or not is_live(row):
        return
    if policy_checksum is not None and row.get("serving_policy_checksum") != policy_checksum:
        return
    reason = f"{RUNTIME_STAGE}: {error.message}"
    # the row's stage shows the block too, unless a next version is on its way through the stages
    stage_columns: dict[str, Any] = (
        {"state": "blocked", "block_reason": reason, "error_class": error.error_class}
        if stage_is_served_version(row)
        else {
            "state": row["state"],
            "block_reason": row.get("block_reason"),
            "error_class": row.get("error_class"),
        }
    )
    state.record(
        runtime,
        adapter_id,
        kind="gateway_failure",
        payload={
            "stage": RUNTIME_STAGE,
            "error_class": error.error_class,
            "error": error.message,
            "policy_checksum": row.get("serving_policy_checksum"),
            **evidence,
        },
        policy_path=Path(row["policy_path"]),
        serving_block_reason=reason,
        serving_error_class=error.error_class,
        **stage_columns,
    )
