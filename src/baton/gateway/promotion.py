"""``promote`` / ``demote``: an adapter goes live only on a passing replay that matches its current policy.

A promoted adapter that drifts at run time is blocked with stage ``runtime``; it stays blocked until it
is locked, verified and replayed again and promoted anew.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.gateway import state
from baton.gateway.policy import Policy, load_policy, policy_path
from baton.gateway.stages import check_chain, identify
from baton.receipts import sha256_hex
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


def replay_receipt(runtime: Runtime, adapter_id: str, sha256: str) -> dict[str, Any] | None:
    """The replay receipt file whose bytes hash to ``sha256``, or None."""
    directory = state.adapter_dir(runtime, adapter_id) / "receipts"
    for file in sorted(directory.glob("replay-*.json")) if directory.is_dir() else []:
        data = file.read_bytes()
        if sha256_hex(data) == sha256:
            value: dict[str, Any] = json.loads(data)
            return value
    return None


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


def promote(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """Make the adapter live; refuses with ``adapter_promotion_refused`` unless the replay matches."""
    path = policy_path(runtime.settings, adapter)
    adapter_id, _ = identify(path)
    row = state.get_adapter(runtime, adapter_id)
    if row is None:
        raise _refuse(adapter_id, "baton has never locked or replayed it.")
    policy, checksum = load_policy(path)
    check_chain(runtime, policy)
    receipt = _check_replay(runtime, policy, checksum, row)
    assert policy.contract is not None
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
    payload = {
        "policy_checksum": checksum,
        "replay_receipt_sha256": row["replay_receipt_sha256"],
        "replay_run_id": receipt.get("run_id"),
        "contract": policy.contract.model_dump(),
        "allowed_tools": list(policy.tools.allowed),
        "approval_required": list(policy.tools.approval_required),
        "network": policy.runtime.network,
        "allowed_origins": list(policy.runtime.allowed_origins),
        "mounts": [mount.model_dump() for mount in policy.runtime.mounts],
        "constraints": list(policy.resolution.constraints),
    }
    stored = state.record(
        runtime,
        policy.id,
        state="promoted",
        kind="gateway_promote",
        payload=payload,
        policy_path=path,
        policy_checksum=checksum,
        replay_receipt_sha256=row["replay_receipt_sha256"],
        contract=policy.contract.model_dump(),
    )
    return {"adapter_id": policy.id, "state": "promoted", "receipt_seq": stored.seq, **payload}


def demote(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """Take a promoted (or run-time blocked) adapter out of service; it goes back to ``replayed``."""
    path = policy_path(runtime.settings, adapter)
    adapter_id, _ = identify(path)
    row = state.get_adapter(runtime, adapter_id)
    if row is None or not is_live(row):
        raise GatewayError(
            "adapter_not_promoted", f"Adapter {adapter_id} is not promoted.", adapter_id=adapter_id
        )
    target: state.State = "replayed" if row["state"] == "promoted" else "blocked"
    stored = state.record(
        runtime,
        adapter_id,
        state=target,
        kind="gateway_demote",
        payload={"previous_state": row["state"]},
        policy_path=Path(row["policy_path"]),
        block_reason=None if target == "replayed" else f"demoted; was {row['block_reason']}",
        error_class=row.get("error_class") if target == "blocked" else None,
    )
    return {"adapter_id": adapter_id, "state": target, "receipt_seq": stored.seq}


def is_live(row: dict[str, Any]) -> bool:
    """Promoted, or blocked at run time after a promotion (its tools then answer the block's class)."""
    reason = row.get("block_reason") or ""
    return row["state"] == "promoted" or (
        row["state"] == "blocked" and reason.startswith(f"{RUNTIME_STAGE}:")
    )


def block_at_runtime(
    runtime: Runtime, adapter_id: str, error: GatewayError, evidence: dict[str, Any]
) -> None:
    """Block a promoted adapter whose upstream drifted (stage ``runtime``), with a failure receipt."""
    row = state.get_adapter(runtime, adapter_id)
    if row is None:
        return
    state.record_failure(
        runtime,
        adapter_id,
        stage=RUNTIME_STAGE,
        error=error,
        policy_path=Path(row["policy_path"]),
        receipt={"error_class": error.error_class, "error": error.message, **evidence},
    )


@dataclass(frozen=True)
class LiveAdapter:
    """A live adapter as the proxy serves it: its policy as promoted and its row."""

    policy: Policy
    row: dict[str, Any]


def serving_problem(row: dict[str, Any]) -> str | None:
    """Why a live row is not served (its policy no longer loads, or changed since the promotion)."""
    try:
        _, checksum = load_policy(Path(row["policy_path"]))
    except GatewayError as exc:
        return f"{exc.error_class}: {exc.message}"
    if checksum != row.get("policy_checksum"):
        return "the policy changed after the promotion; replay and promote it again"
    return None


def live_adapters(runtime: Runtime) -> list[LiveAdapter]:
    """Every live adapter whose policy file still loads unchanged (others: see :func:`serving_problem`)."""
    result = []
    for row in state.list_adapters(runtime):
        if is_live(row) and serving_problem(row) is None:
            policy, _ = load_policy(Path(row["policy_path"]))
            result.append(LiveAdapter(policy, row))
    return result
