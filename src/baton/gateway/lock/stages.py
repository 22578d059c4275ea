"""The gateway's verify and check stages: a locked bundle verified again, and its policy checked against what replay saw."""

from __future__ import annotations

import logging
from typing import Any

from baton.errors import GatewayError
from baton.gateway import progress
from baton.gateway.policy import state
from baton.gateway.policy.bookkeeping import (
    check_chain,
    fail_closed,
    identify,
    locked_row,
    replayed_definitions,
)
from baton.gateway.policy.policy_files import load_policy, policy_path
from baton.runtime import Runtime

log = logging.getLogger("baton.gateway")


def verify(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """Run the independent verifier over the adapter's bundle and record its receipt."""
    from baton.gateway.lock.verifier import verify_bundle

    path = policy_path(runtime.settings, adapter)
    adapter_id, checksum = identify(path)

    def stage(run_id: str) -> dict[str, Any]:
        policy, checksum = load_policy(path)
        row = locked_row(runtime, policy)
        bundle = state.adapter_dir(runtime, policy.id) / "bundle"
        progress.phase(f"verifying the {len(policy.artifacts)} packages of {policy.id}")
        receipt, sha = verify_bundle(
            bundle, policy_file=path, expected_lock_sha256=row["lock_receipt_sha256"]
        )
        if receipt["status"] != "completed_verified":
            raise GatewayError(receipt["error_class"], f"The bundle of {policy.id} does not verify.")
        payload = {
            "run_id": receipt["run_id"],
            "verifier_receipt_sha256": sha,
            "lock_receipt_sha256": row["lock_receipt_sha256"],
            "status": receipt["status"],
        }
        stored = state.record(
            runtime,
            policy.id,
            state="verified",
            kind="gateway_verify",
            payload=payload,
            policy_path=path,
            policy_checksum=checksum,
            verify_receipt_sha256=sha,
            replay_receipt_sha256=None,
        )
        pinned = policy.contract is not None
        return {**payload, "adapter_id": policy.id, "receipt_seq": stored.seq, "contract_pinned": pinned}

    return fail_closed(runtime, adapter_id, path, "verify", stage, policy_checksum=checksum)


def check(runtime: Runtime, adapter: str) -> dict[str, Any]:
    """``baton gateway check``: validate the policy and the receipt chain without running anything."""
    path = policy_path(runtime.settings, adapter)
    adapter_id, checksum = identify(path)

    def stage(run_id: str) -> dict[str, Any]:
        from baton.gateway.lock.verifier import VerificationError, recheck_bundle
        from baton.gateway.policy.checks import check_policy_rules
        from baton.gateway.sandbox.host_programs import check_host_programs
        from baton.gateway.sandbox.interpreter import check_interpreter_pin

        policy, checksum = load_policy(path)
        evidence = check_chain(runtime, policy)
        bundle = state.adapter_dir(runtime, policy.id) / "bundle"
        try:
            recheck_bundle(
                bundle, policy_file=path, expected_lock_sha256=evidence["row"]["lock_receipt_sha256"]
            )
        except VerificationError as exc:
            raise GatewayError(str(exc), f"The bundle of {policy.id} no longer verifies: {exc}.") from None
        check_policy_rules(policy, replayed_definitions(runtime, policy.id, evidence["row"]))
        check_interpreter_pin(policy)
        check_host_programs(policy, unpinned_ok=True)  # the first replay --apply pins new ones
        result = {
            "run_id": run_id,
            "adapter_id": policy.id,
            "status": "completed_check_mode_no_runtime_execution",
            "policy_checksum": checksum,
            "lock_receipt_sha256": evidence["row"]["lock_receipt_sha256"],
            "verifier_receipt_sha256": evidence["row"]["verify_receipt_sha256"],
            "contract_pinned": policy.contract is not None,
            "state": evidence["row"]["state"],
        }
        stored = runtime.receipts.append("gateway_check", result)
        return {**result, "receipt_seq": stored.seq}

    return fail_closed(runtime, adapter_id, path, "check", stage, policy_checksum=checksum)
