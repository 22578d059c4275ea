"""``baton gateway replay --apply``: run the verified server once in the sandbox and compare its contract.

It extracts the verified tarballs, starts the server with no network, performs initialize +
notifications/initialized + tools/list, closes stdin, waits for a clean exit, compares what it saw
with the pins and writes a replay receipt, or a failure receipt with the error class.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import utc_now
from baton.gateway.policy import state
from baton.gateway.policy.bookkeeping import check_chain, fail_closed, identify, write_receipt_file
from baton.gateway.policy.checks import check_policy_rules
from baton.gateway.policy.contract import check_partition, compare, pins_for
from baton.gateway.policy.operator_lock import operator_lock
from baton.gateway.policy.policy import Contract, Policy
from baton.gateway.policy.policy_files import load_policy, policy_path, write_policy
from baton.gateway.replay.extract import Extracted
from baton.gateway.replay.observation import Observation, run_in_sandbox
from baton.gateway.replay.protocol import Session
from baton.gateway.sandbox import landlock
from baton.gateway.sandbox.host_programs import check_host_programs, pin_new
from baton.gateway.sandbox.interpreter import check_interpreter_pin
from baton.gateway.sandbox.mounts import host_mounts
from baton.gateway.sandbox.sandbox import as_nobody, enforcement, sandbox_for
from baton.runtime import Runtime

REPLAY_RECEIPT_SCHEMA_VERSION = "baton_gateway_replay_receipt_v1"
#: MCP versions a draft's first replay accepts when the server negotiates down from the client's.
KNOWN_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def record_contract(path: Path, policy: Policy, observation: Observation) -> Policy:
    """Pin a draft's first observation; every tool starts denied until a person allows it.

    A draft that already allows tools (a new version drafted with ``lock CANDIDATE --replace``) keeps
    them, with their approvals and exemptions, where the new version still has them; everything else
    the server lists is denied.
    """
    if policy.contract is not None:
        raise GatewayError(
            "adapter_policy_invalid", "The policy already pins a contract; edit it by hand to re-pin."
        )
    names = observation.tools.names
    allowed = [name for name in policy.tools.allowed if name in names]
    tools = policy.tools.model_copy(
        update={
            "allowed": allowed,
            "denied": [n for n in names if n not in allowed],
            "approval_required": [n for n in policy.tools.approval_required if n in allowed],
            "allow_destructive_without_approval": [
                n for n in policy.tools.allow_destructive_without_approval if n in allowed
            ],
        }
    )
    pinned = policy.model_copy(
        update={"contract": pins_for(observation.server, observation.tools), "tools": tools}
    )
    write_policy(path, pinned)
    return pinned


def _stage_receipts(
    policy: Policy, evidence: dict[str, Any], observation: Observation, extracted: Extracted
) -> dict[str, Any]:
    """The reference's stage chain: source receipts, risk policy, check, bounded execution, terminal."""
    host_uid = as_nobody()[0] or os.geteuid()
    return {
        "sensor_source_receipt": {
            "lock_receipt_sha256": evidence["row"]["lock_receipt_sha256"],
            "verifier_receipt_sha256": evidence["row"]["verify_receipt_sha256"],
            "artifact_set_sha256": evidence["lock"]["artifact_set_sha256"],
        },
        "risk_policy": {
            "network_mode": "none",
            "read_only_root": True,
            "no_new_privileges": True,
            "cap_drop_all": True,
            "non_root_user": policy.runtime.user,
            "host_uid": host_uid,
            "tool_call_allowed": False,
            **({"enforced": enforcement(policy)} if observation.sandbox == "bubblewrap" else {}),
            **({"enforced": landlock.enforcement(policy)} if observation.sandbox == "landlock" else {}),
        },
        "check_mode": {
            "status": "passed",
            "artifact_receipt_chain_verified": True,
            "adapter_tool_partition_verified": True,
        },
        "bounded_execution": {
            "status": "mcp_initialize_and_tools_list_completed",
            "package_file_count": extracted.file_count,
            "package_unpacked_bytes": extracted.unpacked_bytes,
            "mcp_process_started": True,
            "mcp_tool_call_performed": False,
            "network_enabled": False,
        },
        "rollback_or_no_write_terminal": {
            "status": "mcp_process_exited_and_sandbox_removed",
            "sandbox_removed": observation.sandbox_removed,
            "candidate_registration_state": "disabled",
        },
    }


def build_receipt(
    policy: Policy,
    checksum: str,
    run_id: str,
    evidence: dict[str, Any],
    observation: Observation,
    extracted: Extracted,
) -> dict[str, Any]:
    """The reference controller's replay receipt, for baton's sandboxes."""
    tools, session = observation.tools, observation.session
    return {
        "schema_version": REPLAY_RECEIPT_SCHEMA_VERSION,
        "run_id": run_id,
        "adapter_id": policy.id,
        "candidate": policy.adapter.candidate,
        "risk_class": policy.adapter.risk_class,
        "mode": "apply",
        "status": "completed_protocol_schema_replay",
        "observed_at": utc_now(),
        "policy_checksum": checksum,
        "policy_expires_at": policy.adapter.expires_at,
        "sandbox": observation.sandbox,
        "protocol_observation": {
            **observation.server,
            "tool_count": tools.tool_count,
            "tool_name_set_sha256": tools.tool_name_set_sha256,
            "tool_schema_manifest_sha256": tools.tool_schema_manifest_sha256,
            "tool_definition_sha256": tools.tool_definition_sha256,
            "server_capabilities": observation.server_capabilities,
            "adapter_allowed_tools": list(policy.tools.allowed),
            "adapter_denied_tool_count": len(policy.tools.denied),
            "process_exit_code": session.exit_code,
            "shutdown_mode": session.shutdown_mode,
            **({"stdout_noise": session.stdout_noise} if session.stdout_noise else {}),
            **session.stderr,
        },
        "client": {
            "protocol_version": policy.client.protocol_version,
            "declared_capabilities": policy.client.capabilities,
            "server_requests": session.server_requests,
            "notifications": session.notifications,
        },
        "tool_definitions": observation.definitions,
        "tool_execution": observation.tool_execution,
        "tool_call_performed": False,
        "browser_started": False,
        "production_write_performed": False,
        "promotion_allowed": False,
        "stage_receipts": _stage_receipts(policy, evidence, observation, extracted),
    }


def _observe(
    runtime: Runtime, path: Path, policy: Policy, session: Session, record: bool
) -> tuple[Policy, Observation, Extracted]:
    """Run the server once; a draft's first replay may pin the older MCP version it negotiated and retry."""
    mounts = host_mounts(policy, runtime.settings.home)
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    try:
        observation, extracted = run_in_sandbox(policy, bundle, session, mounts)
    except GatewayError as exc:
        answered = exc.details.get("answered")
        if not (record and policy.contract is None and answered in KNOWN_PROTOCOL_VERSIONS):
            raise
        # A draft's first replay: the server speaks an older MCP version; pin what it negotiated.
        client = policy.client.model_copy(update={"protocol_version": answered})
        policy = policy.model_copy(update={"client": client})
        write_policy(path, policy)
        observation, extracted = run_in_sandbox(policy, bundle, session, mounts)
    return policy, observation, extracted


def _checked_contract(policy: Policy, observation: Observation) -> Contract:
    """The pinned contract, once the observation matches it, the tool partition and the policy's rules."""
    if policy.contract is None:
        raise GatewayError("adapter_contract_unpinned", f"Adapter {policy.id} pins no contract yet.")
    try:
        compare(policy.contract, observation.server, observation.tools)
    except GatewayError as exc:
        exc.details.setdefault("next", redraft_step(policy))
        raise
    check_partition(policy.tools, observation.tools)
    check_policy_rules(policy, observation.definitions)
    return policy.contract


def redraft_step(policy: Policy) -> str:
    """The command that re-pins a drifted contract: the locked version drafted again with the contract
    unpinned (``--replace`` keeps the allowed tools), then verify and ``replay --apply --record-contract``."""
    import shlex

    from baton.gateway.lock.candidates import parse_candidate

    candidate = policy.adapter.candidate
    try:
        ecosystem, name, _ = parse_candidate(candidate)
    except GatewayError:
        return f"baton gateway diff {policy.id}"
    version = next((a.version for a in policy.artifacts if a.name == name), None)
    if version is not None:
        candidate = f"npm:{name}@{version}" if ecosystem == "npm" else f"pypi:{name}=={version}"
    return shlex.join(["baton", "gateway", "lock", candidate, "--id", policy.id, "--replace"])


def _replay_receipt(
    runtime: Runtime,
    policy: Policy,
    checksum: str,
    run_id: str,
    evidence: dict[str, Any],
    observation: Observation,
    extracted: Extracted,
) -> dict[str, Any]:
    """The replay receipt with baton's additions: call policy, host program pins, poisoning findings."""
    receipt = build_receipt(policy, checksum, run_id, evidence, observation, extracted)
    receipt["call_policy_sha256"] = policy.tools.call_policy_sha256
    receipt["host_programs"] = [pin.model_dump() for pin in policy.host_programs]
    receipt["poisoning_findings"] = poisoning_findings(runtime, policy.id, observation.definitions)
    return receipt


def _summary(run_id: str, sha: str, checksum: str, receipt: dict[str, Any]) -> dict[str, Any]:
    """What the state row and the caller see of a replay: the receipt's hash and its key sections."""
    return {
        "run_id": run_id,
        "replay_receipt_sha256": sha,
        "policy_checksum": checksum,
        "protocol_observation": receipt["protocol_observation"],
        "client": receipt["client"],
        "poisoning_findings": receipt["poisoning_findings"],
        "host_programs": receipt["host_programs"],
    }


def _apply(
    runtime: Runtime,
    path: Path,
    policy: Policy,
    evidence: dict[str, Any],
    session: Session,
    record: bool,
    run_id: str,
) -> dict[str, Any]:
    """Observe once, pin a draft when asked, compare, and record the replay receipt."""
    policy, observation, extracted = _observe(runtime, path, policy, session, record)
    if record and policy.contract is None:
        policy = record_contract(path, policy, observation)
    policy, checksum = load_policy(path)
    contract = _checked_contract(policy, observation)
    receipt = _replay_receipt(runtime, policy, checksum, run_id, evidence, observation, extracted)
    sha = write_receipt_file(runtime, policy.id, f"replay-{run_id}.json", receipt)
    summary = _summary(run_id, sha, checksum, receipt)
    stored = state.record(
        runtime,
        policy.id,
        state="replayed",
        kind="gateway_replay",
        payload=summary,
        policy_path=path,
        policy_checksum=checksum,
        replay_receipt_sha256=sha,
        contract=contract.model_dump(),
    )
    return {**summary, "adapter_id": policy.id, "receipt_seq": stored.seq, "receipt": receipt}


def poisoning_findings(
    runtime: Runtime, adapter_id: str, definitions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The tool-poisoning findings over a replay's definitions, other live adapters' tools considered."""
    from baton.gateway.policy.snapshot import live_adapters
    from baton.gateway.replay.poisoning import scan

    others = [(live.policy.id, tool) for live in live_adapters(runtime) for tool in live.policy.tools.allowed]
    return scan(definitions, adapter_id=adapter_id, other_tools=others)


def replay(runtime: Runtime, adapter: str, *, apply: bool = False, record: bool = False) -> dict[str, Any]:
    """Replay an adapter (``apply``), or without ``apply`` show the plan after checking the chain."""
    if record and not apply:
        raise GatewayError(
            "invalid_arguments",
            "--record-contract pins what a real replay observes; add --apply (nothing was run or written).",
        )
    path = policy_path(runtime.settings, adapter)
    adapter_id, checksum = identify(path)
    session = Session()

    def stage(run_id: str) -> dict[str, Any]:
        from baton.gateway.policy.cedar_policy import policy_file, read_pinned

        policy, _ = load_policy(path)
        evidence = check_chain(runtime, policy)
        check_interpreter_pin(policy)
        if apply:
            policy = pin_new(path, policy)  # declared host programs: pinned now if new, else checked
        else:
            check_host_programs(policy, unpinned_ok=True)
        read_pinned(policy_file(path), policy.tools.call_policy_sha256)  # the pinned call policy is there
        if policy.contract is None and not record:
            raise GatewayError("adapter_contract_unpinned", f"Adapter {policy.id} pins no contract yet.")
        if apply:
            return _apply(runtime, path, policy, evidence, session, record, run_id)
        return {
            "adapter_id": policy.id,
            "status": "completed_check_mode_no_runtime_execution",
            "sandbox": sandbox_for(policy.runtime.sandbox).name,
            "argv": [*policy.runtime.entrypoint, *policy.runtime.arguments],
        }

    def extra() -> dict[str, Any]:
        return {
            "shutdown_mode": session.shutdown_mode,
            "process_exit_code": session.exit_code,
            "server_requests": session.server_requests,
            "stderr_tail": session.stderr_tail,
            "stderr_headline": session.stderr_headline,
            "stdout_line": session.stdout_line,
            "stdout_noise": session.stdout_noise,
            **session.stderr,
        }

    # --apply writes what a promote reads: it takes the adapter's operator lock, outside fail_closed, so a
    # busy refusal records nothing
    with operator_lock(runtime, adapter_id) if apply else nullcontext():
        try:
            return fail_closed(
                runtime, adapter_id, path, "replay", stage, policy_checksum=checksum, extra=extra
            )
        except GatewayError as exc:
            headline = str(exc.details.get("stderr_headline") or "")
            if any(sign in headline for sign in MCP_2X) and not exc.details.get("next"):
                exc.details["next"] = _pin_mcp_1(path)
            raise


#: What a server written for the ``mcp`` 1.x SDK says under 2.x: FastMCP is gone, and so are the low-level
#: ``Server``'s decorators (``@server.list_tools()``: cli-mcp-server).
MCP_2X = ("No module named 'mcp.server.fastmcp'", "AttributeError: 'Server' object has no attribute ")


def _pin_mcp_1(path: Path) -> str | None:
    """A server built on the mcp 1.x SDK resolved against 2.x: its candidate drafted again with mcp<2."""
    try:
        policy, _ = load_policy(path, check_expiry=False)
    except GatewayError:
        return None
    if not any(a.name == "mcp" and a.version.split(".")[0] not in ("0", "1") for a in policy.artifacts):
        return None  # the closure's mcp is not 2.x: some other ``Server``
    step = redraft_step(policy)
    return f"{step} --constraint 'mcp<2'" if step.startswith("baton gateway lock pypi:") else None
