"""``baton gateway export ID --format replay-controller DIR``: an adapter's lock, verify and replay as the
four inputs of the reference replay controller (the one this gateway generalizes), in its schemas.

The controller checks, by its own hash definitions: the artifact policy's canonical sha256, the two
receipts' sha256 over their bytes, the chain from the verifier receipt to the controller receipt, and
each package's sha512. baton's evidence maps onto them: the lock receipt is the controller receipt (its
packages, manifest and SBOM hashes), the verifier receipt is the verifier receipt, the policy and its
pinned contract are the replay policy. Where the controller names a thing baton has no counterpart for,
the export says what stands in: ``artifact_ref`` and the runtime refs are OCI-form names of baton's
bundle and sandbox spec (``baton.invalid/gateway/ID/…@sha256:…``, not pullable images), and
``audit_commit`` is the git blob id of the bundle's ``lock-receipt.json`` (what ``git hash-object`` gives).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy import state
from baton.gateway.policy.bookkeeping import check_chain
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import load_policy, policy_path
from baton.runtime import Runtime

FORMAT = "replay-controller"
POLICY_SCHEMA_VERSION = "awoooi_external_mcp_replay_policy_v1"
ARTIFACT_POLICY_SCHEMA_VERSION = "awoooi_external_mcp_artifact_policy_v1"
ARTIFACT_CONTROLLER_SCHEMA_VERSION = "awoooi_external_mcp_artifact_receipt_v1"
ARTIFACT_VERIFIER_SCHEMA_VERSION = "awoooi_external_mcp_artifact_verifier_receipt_v1"
FILES = {
    "policy": "replay-policy.json",
    "artifact_policy": "artifact-policy.json",
    "controller_receipt": "artifact-controller-receipt.json",
    "verifier_receipt": "artifact-verifier-receipt.json",
}
#: Receipt fields that keep a receipt from opening any later stage (the controller requires them False).
RECEIPT_BOUNDARIES = ("promotion_allowed", "replay_allowed", "shadow_allowed", "canary_allowed")
EXECUTION_BOUNDARIES = (
    "direct_gateway_registration_allowed",
    "adapter_registration_allowed",
    "browser_start_allowed",
    "tool_call_allowed",
    "navigation_allowed",
    "authenticated_session_allowed",
    "raw_request_or_response_body_storage_allowed",
    "external_rag_write_allowed",
    "production_write_allowed",
    "shadow_allowed",
    "canary_allowed",
    "promotion_allowed",
)
#: What still stands between a passing replay and serving, in baton's terms.
PROMOTION_BLOCKERS = (
    "poisoning_findings_accepted_by_id",
    "tool_allow_list_reviewed",
    "call_policy_pinned_when_needed",
    "operator_runs_baton_gateway_promote",
)


def _bytes(value: dict[str, Any]) -> bytes:
    """What every exported file holds: canonical JSON and a newline (the controller's own encoding)."""
    return canonical_json(value).encode("utf-8") + b"\n"


def _ref(policy: Policy, what: str, digest: str) -> str:
    return f"baton.invalid/gateway/{policy.id.lower()}/{what}@sha256:{digest}"


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _packages(lock: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": p["name"], "version": p["version"], "tarball_sha512_hex": p["tarball_sha512_hex"]}
        for p in lock.get("packages") or []
    ]


def _receipts(
    policy: Policy, chain: dict[str, Any], refs: dict[str, str], checksum: str
) -> tuple[bytes, bytes]:
    """The controller and verifier receipts, in the controller's schemas, linked by sha256."""
    lock, verifier = chain["lock"], chain["verifier"]
    identity = {"run_id": lock["run_id"], "trace_id": f"mcp-artifact-{lock['run_id']}"}
    common = {
        **identity,
        "adapter_id": policy.id,
        "internal_mirror_ref": refs["artifact"],
        "runtime_mirror_ref": refs["runtime"],
        "policy_checksum": checksum,
        **dict.fromkeys(RECEIPT_BOUNDARIES, False),
    }
    controller = _bytes(
        {
            **common,
            "schema_version": ARTIFACT_CONTROLLER_SCHEMA_VERSION,
            "status": "completed_internal_mirror_pending_independent_verifier",
            "observed_at": lock.get("observed_at"),
            "bundle_manifest_sha256": lock["bundle_manifest_sha256"],
            "cyclonedx_sbom_sha256": lock["cyclonedx_sbom_sha256"],
            "packages": _packages(lock),
            "baton_lock_receipt_sha256": chain["row"]["lock_receipt_sha256"],
        }
    )
    verified = verifier.get("independent_post_verifier") or {}
    return controller, _bytes(
        {
            **common,
            "schema_version": ARTIFACT_VERIFIER_SCHEMA_VERSION,
            "status": "completed_internal_mirror_verified",
            "observed_at": verifier.get("observed_at"),
            "controller_receipt_sha256": sha256_hex(controller),
            "independent_post_verifier": {**verified, "baton_verifier_run_id": verifier.get("run_id")},
        }
    )


def _runtime(policy: Policy, image: str) -> dict[str, Any]:
    spec = policy.runtime
    return {
        "network_mode": spec.network,
        "read_only_root": spec.read_only_root,
        "no_new_privileges": spec.no_new_privileges,
        "cap_drop": list(spec.cap_drop),
        "entrypoint": list(spec.entrypoint),
        "arguments": list(spec.arguments),
        "user": spec.user,
        "image_ref": image,
        "platform": spec.platform,
        "pids_limit": spec.pids_limit,
        "memory_limit": spec.memory_limit,
        "cpu_limit": spec.cpu_limit or "1",
        "tmpfs": spec.tmpfs,
        "startup_timeout_seconds": spec.startup_timeout_seconds,
        "shutdown_timeout_seconds": spec.shutdown_timeout_seconds,
    }


def _replay_policy(policy: Policy, source: dict[str, Any], image: str) -> dict[str, Any]:
    """The replay policy: the adapter's policy and pinned contract, pointing at the evidence by hash."""
    assert policy.contract is not None
    contract = policy.contract
    return {
        "schema_version": POLICY_SCHEMA_VERSION,
        "policy_version": "1.0.0",
        "scope": "offline_protocol_and_tool_schema_compatibility_only",
        "work_item_id": f"baton-gateway-{policy.id}",
        "candidate_id": policy.adapter.candidate,
        "adapter_id": policy.id,
        "risk_class": policy.adapter.risk_class,
        "owner_lane": policy.adapter.owner,
        "expires_at": policy.adapter.expires_at,
        "exit_condition": "the policy expires, or a replay observes another contract",
        "replacement_action": f"baton gateway lock {policy.id} --replace, then verify and replay",
        "rollback_ref": f"baton gateway demote {policy.id}",
        "post_verifier": "python -m baton.gateway.lock.verifier BUNDLE (standard library only)",
        "artifact_source": source,
        "runtime": _runtime(policy, image),
        "protocol_contract": {
            "protocol_version": contract.protocol_version,
            "server_name": contract.server_name,
            "server_version": contract.server_version,
            "tool_count": contract.tool_count,
            "tool_name_set_sha256": contract.tool_name_set_sha256,
            "tool_schema_manifest_sha256": contract.tool_schema_manifest_sha256,
            "adapter_allowed_tools": sorted(policy.tools.allowed),
            "adapter_denied_tools": sorted(policy.tools.denied),
        },
        "execution_boundaries": dict.fromkeys(EXECUTION_BOUNDARIES, False),
        "promotion_blockers_after_replay": list(PROMOTION_BLOCKERS),
    }


def _replayed(runtime: Runtime, adapter: str) -> tuple[Policy, str, dict[str, Any]]:
    """The adapter's policy, checksum and receipt chain, once it is an npm adapter with a passing replay."""
    policy, checksum = load_policy(policy_path(runtime.settings, adapter), check_expiry=False)
    if policy.contract is None or any(a.ecosystem != "npm" for a in policy.artifacts):
        raise GatewayError(
            "invalid_arguments",
            f"Adapter {policy.id} needs npm artifacts and a pinned contract (lock, verify, replay "
            "--apply --record-contract) before it can be exported for the replay controller.",
        )
    chain = check_chain(runtime, policy)
    if chain["row"].get("policy_checksum") != checksum or not chain["row"].get("replay_receipt_sha256"):
        raise GatewayError(
            "invalid_arguments", f"Adapter {policy.id} has no passing replay under its current policy."
        )
    return policy, checksum, chain


def export(runtime: Runtime, adapter: str, fmt: str, directory: str) -> dict[str, Any]:
    """Write the four controller inputs of a replayed npm adapter into ``directory``; returns their paths
    and the controller's ``check`` command line."""
    if fmt != FORMAT:
        raise GatewayError("invalid_arguments", f"Unknown export format {fmt!r}; the one format is {FORMAT}.")
    policy, checksum, chain = _replayed(runtime, adapter)
    lock = chain["lock"]
    artifact_policy = {
        "schema_version": ARTIFACT_POLICY_SCHEMA_VERSION,
        "adapter_id": policy.id,
        "candidate_id": policy.adapter.candidate,
        "baton_policy_checksum": checksum,
        "artifact_set_sha256": lock.get("artifact_set_sha256"),
        "artifacts": [a.model_dump(mode="json", exclude_none=True) for a in policy.artifacts],
    }
    artifact_checksum = f"sha256:{sha256_hex(canonical_json(artifact_policy))}"
    refs = {
        "artifact": _ref(policy, "bundle", lock["bundle_manifest_sha256"]),
        "runtime": _ref(
            policy, "sandbox", sha256_hex(canonical_json(policy.runtime.model_dump(mode="json")))
        ),
    }
    controller, verified = _receipts(policy, chain, refs, artifact_checksum)
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    source = {
        "policy_checksum": artifact_checksum,
        "audit_branch": f"baton-gateway/{policy.id}",
        "audit_commit": _git_blob_id((bundle / "lock-receipt.json").read_bytes()),
        "controller_receipt_sha256": sha256_hex(controller),
        "verifier_receipt_sha256": sha256_hex(verified),
        "artifact_ref": refs["artifact"],
        "artifact_runtime_ref": refs["runtime"],
        "bundle_manifest_sha256": lock["bundle_manifest_sha256"],
        "cyclonedx_sbom_sha256": lock["cyclonedx_sbom_sha256"],
        "package_integrities": {
            f"{p['name']}@{p['version']}": p["tarball_sha512_hex"] for p in _packages(lock)
        },
    }
    contents = {
        "policy": _bytes(_replay_policy(policy, source, refs["runtime"])),
        "artifact_policy": _bytes(artifact_policy),
        "controller_receipt": controller,
        "verifier_receipt": verified,
    }
    return _write(policy, Path(directory).expanduser(), contents)


def _write(policy: Policy, directory: Path, contents: dict[str, bytes]) -> dict[str, Any]:
    """Write the files and say how to run the controller's ``check`` on them."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {key: directory / FILES[key] for key in FILES}
    for key, data in contents.items():
        paths[key].write_bytes(data)
    run_id = str(uuid.uuid4())
    command = [
        "replay_controller.py",
        *("--policy", str(paths["policy"])),
        *("--artifact-policy", str(paths["artifact_policy"])),
        *("--artifact-controller-receipt", str(paths["controller_receipt"])),
        *("--artifact-verifier-receipt", str(paths["verifier_receipt"])),
        *("--run-id", run_id, "--trace-id", f"mcp-replay-{run_id}", "check"),
    ]
    return {
        "adapter_id": policy.id,
        "format": FORMAT,
        "files": {key: str(path) for key, path in paths.items()},
        "sha256": {key: sha256_hex(data) for key, data in contents.items()},
        "check_command": command,
    }
