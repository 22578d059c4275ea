"""An adapter's fail-closed bookkeeping, shared by every stage: failure receipts, the lock and verifier
receipts' chain, the replayed definitions, and the list view."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex, utc_now
from baton.gateway.policy import state
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import adapters_dir, read_policy_document
from baton.runtime import Runtime
from baton.store.private import private_tree, write_private

T = TypeVar("T")
log = logging.getLogger("baton.gateway")
FAILURE_RECEIPT_SCHEMA_VERSION = "baton_gateway_failure_receipt_v1"


def failure_receipt(
    adapter_id: str, stage: str, error: GatewayError, run_id: str, policy_checksum: str | None, **extra: Any
) -> dict[str, Any]:
    """The reference controller's failure shape: blocked, with the error class and nothing started."""
    return {
        "schema_version": FAILURE_RECEIPT_SCHEMA_VERSION,
        "run_id": run_id,
        "adapter_id": adapter_id,
        "stage": stage,
        "status": "blocked_with_safe_next_action",
        "error_class": error.error_class,
        "error": error.message,
        "observed_at": utc_now(),
        "policy_checksum": policy_checksum,
        "tool_call_performed": False,
        "production_write_performed": False,
        "promotion_allowed": False,
        **extra,
        "stage_receipts": {
            "rollback_or_no_write_terminal": {
                "status": "candidate_disabled_ephemeral_process_cleanup_attempted",
                "candidate_registration_state": "disabled",
                "production_route_changed": False,
            }
        },
    }


def write_receipt_file(runtime: Runtime, adapter_id: str, name: str, receipt: dict[str, Any]) -> str:
    """Write a receipt under ``BATON_HOME/gateway/<id>/receipts``; returns the file's sha256."""
    directory = state.adapter_dir(runtime, adapter_id) / "receipts"
    private_tree(directory, runtime.settings.home)
    data = canonical_json(runtime.redactor.value(receipt)).encode("utf-8") + b"\n"
    write_private(directory / name, data)
    return sha256_hex(data)


def fail_closed(
    runtime: Runtime,
    adapter_id: str,
    path: Path,
    stage: str,
    fn: Callable[[str], T],
    *,
    policy_checksum: str | None = None,
    extra: Callable[[], dict[str, Any]] | None = None,
) -> T:
    """Run a stage; on a GatewayError block the adapter, write a failure receipt, and re-raise."""
    run_id = str(uuid.uuid4())
    try:
        try:
            return fn(run_id)
        except GatewayError:
            raise
        except Exception as unexpected:  # a bug or an unforeseen input: still typed, receipted, no traceback
            log.debug("gateway stage %s of %s failed unexpectedly", stage, adapter_id, exc_info=True)
            raise GatewayError(
                "internal_error", f"The {stage} stage failed unexpectedly ({type(unexpected).__name__})."
            ) from None
    except GatewayError as exc:
        receipt = failure_receipt(
            adapter_id, stage, exc, run_id, policy_checksum, **(extra() if extra else {})
        )
        sha = write_receipt_file(runtime, adapter_id, f"{stage}-failure-{run_id}.json", receipt)
        # A live adapter's served snapshot is not touched: the failure blocks its next version only.
        serving = {"serving_unchanged": True} if live(runtime, adapter_id) else {}
        state.record_failure(
            runtime,
            adapter_id,
            stage=stage,
            error=exc,
            policy_path=path,
            receipt={**receipt, "receipt_sha256": sha, **serving},
        )
        exc.details.setdefault("failure_receipt_sha256", sha)
        exc.details.setdefault(
            "failure_receipt_path",
            str(state.adapter_dir(runtime, adapter_id) / "receipts" / f"{stage}-failure-{run_id}.json"),
        )
        for key in (
            "process_exit_code",
            "shutdown_mode",
            "stderr_tail",
            "stderr_headline",
            "stdout_line",
            "stdout_noise",
        ):
            if receipt.get(key) is not None:
                exc.details.setdefault(key, receipt[key])
        raise


def live(runtime: Runtime, adapter_id: str) -> bool:
    row = state.get_adapter(runtime, adapter_id)
    return row is not None and state.is_live(row)


def identify(path: Path) -> tuple[str, str | None]:
    """The adapter id a policy file claims (its file name when unreadable) and its checksum."""
    import re

    from baton.gateway.policy.policy import ADAPTER_ID_PATTERN

    try:
        raw, checksum = read_policy_document(path)
    except GatewayError as exc:
        if exc.error_class == "adapter_not_found":
            raise
        return path.stem, None
    claimed = (raw.get("adapter") or {}).get("id") if isinstance(raw.get("adapter"), dict) else None
    if isinstance(claimed, str) and re.fullmatch(ADAPTER_ID_PATTERN, claimed):
        return claimed, checksum
    return path.stem, checksum


def locked_row(runtime: Runtime, policy: Policy) -> dict[str, Any]:
    row = state.get_adapter(runtime, policy.id)
    if row is None or not row.get("lock_receipt_sha256"):
        raise GatewayError("adapter_not_locked", f"Adapter {policy.id} has no lock; run baton gateway lock.")
    return row


def read_bundle_receipt(bundle: Path, name: str, expected_sha: str | None) -> dict[str, Any]:
    try:
        raw = (bundle / name).read_bytes()
    except OSError:
        raise GatewayError("artifact_bundle_invalid", f"{name} is missing from the bundle.") from None
    if expected_sha is None or sha256_hex(raw) != expected_sha:
        raise GatewayError(
            "artifact_receipt_chain_invalid", f"{name} differs from the one the store recorded."
        )
    value: dict[str, Any] = json.loads(raw)
    return value


def check_chain(runtime: Runtime, policy: Policy) -> dict[str, Any]:
    """Policy, lock receipt and verifier receipt agree with each other and with the store; nothing runs."""
    row = locked_row(runtime, policy)
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    lock = read_bundle_receipt(bundle, "lock-receipt.json", row["lock_receipt_sha256"])
    if lock.get("artifact_set_sha256") != policy.artifact_set_sha256():
        raise GatewayError(
            "artifact_receipt_chain_invalid", "The policy's artifacts differ from the locked set."
        )
    if not row.get("verify_receipt_sha256"):
        raise GatewayError(
            "adapter_not_verified", f"Adapter {policy.id} is not verified; run baton gateway verify."
        )
    verifier = read_bundle_receipt(bundle, "verifier-receipt.json", row["verify_receipt_sha256"])
    if (
        verifier.get("status") != "completed_verified"
        or verifier.get("lock_receipt_sha256") != row["lock_receipt_sha256"]
    ):
        raise GatewayError(
            "artifact_receipt_chain_invalid", "The verifier receipt does not vouch for this lock."
        )
    chain = runtime.receipts.verify()
    if not chain.ok:
        raise GatewayError("receipt_chain_broken", f"The receipt chain is broken: {chain.reason}.")
    return {"lock": lock, "verifier": verifier, "row": row}


def last_replay_receipt(runtime: Runtime, adapter_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """The receipt of the adapter's last passing replay ({} when there is none)."""
    sha = row.get("replay_receipt_sha256")
    directory = state.adapter_dir(runtime, adapter_id) / "receipts"
    if not sha or not directory.is_dir():
        return {}
    for file in directory.glob("replay-*.json"):
        data = file.read_bytes()
        if sha256_hex(data) == sha:
            receipt = json.loads(data)
            return receipt if isinstance(receipt, dict) else {}
    return {}


def replayed_definitions(runtime: Runtime, adapter_id: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool definitions of the adapter's last replay (its annotations feed the destructive rule)."""
    definitions = last_replay_receipt(runtime, adapter_id, row).get("tool_definitions")
    return definitions if isinstance(definitions, list) else []


def served_state(row: dict[str, Any]) -> tuple[str, str | None]:
    """(the state to show, the stage of a next version on its way) for one adapter row.

    A live adapter shows ``promoted`` (or ``blocked`` when its served version was blocked at run time)
    whatever stage a re-lock of its next version has reached; that stage is the second value.
    """
    if not state.is_live(row):
        return row["state"], None
    shown = "blocked" if row.get("serving_block_reason") else "promoted"
    if state.stage_is_served_version(row):
        return shown, None
    same_version = row.get("policy_checksum") and row.get("policy_checksum") == row.get(
        "serving_policy_checksum"
    )
    if same_version and row["state"] != "blocked":
        return shown, None  # the served version itself re-verified or re-replayed: no next version exists
    return shown, row["state"]


def list_view(runtime: Runtime) -> list[dict[str, Any]]:
    """Every adapter baton knows (store rows plus policy files not yet locked) with its state."""
    rows = {row["id"]: row for row in state.list_adapters(runtime)}
    directory = adapters_dir(runtime.settings)
    for file in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        if file.stem not in rows:
            rows[file.stem] = {"id": file.stem, "state": "drafted", "policy_path": str(file)}
    result = []
    for adapter_id, row in sorted(rows.items()):
        pinned, mounts, constraints = None, None, None
        try:
            raw, _ = read_policy_document(Path(row["policy_path"]))
            pinned = "contract" in raw
            mounts = (
                (raw.get("runtime") or {}).get("mounts") if isinstance(raw.get("runtime"), dict) else None
            )
            resolution = raw.get("resolution")
            constraints = resolution.get("constraints") if isinstance(resolution, dict) else None
        except GatewayError:
            pass
        shown, next_state = served_state(row)
        result.append(
            {
                "adapter_id": adapter_id,
                "state": shown,
                "next_version_state": next_state,
                # a served version always has its contract pinned (the next version's may not yet)
                "contract_pinned": True if state.is_live(row) else pinned,
                "mounts": mounts or [],
                "constraints": constraints if isinstance(constraints, list) else [],
                "block_reason": row.get("serving_block_reason") or row.get("block_reason"),
                "error_class": row.get("serving_error_class") or row.get("error_class"),
                "policy_path": row["policy_path"],
                "updated_at": row.get("updated_at"),
                "poisoning_findings": last_replay_receipt(runtime, adapter_id, row).get("poisoning_findings")
                or [],
            }
        )
    return result
