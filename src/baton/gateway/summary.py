"""The short human summary each ``baton gateway`` command prints (``--json`` prints the full result)."""

from __future__ import annotations

import shlex
from typing import Any

from baton.errors import BatonError


def _contract_step(adapter_id: str, pinned: bool) -> str:
    record = "" if pinned else " --record-contract"
    return f"baton gateway replay {adapter_id} --apply{record}"


def summarize(command: str, result: dict[str, Any]) -> list[str]:
    """A few lines saying what happened, the last one the next command to run."""
    adapter_id = str(result.get("adapter_id", "?"))
    if command == "lock":
        return _locked(adapter_id, result)
    if command == "verify":
        return [
            f"verified {adapter_id}: every hash recomputed by the independent verifier",
            f"next: {_contract_step(adapter_id, bool(result.get('contract_pinned')))}",
        ]
    if command == "check":
        return [
            f"checked {adapter_id}: policy, receipts, bundle hashes, policy rules and interpreter pin hold",
            f"next: {_contract_step(adapter_id, bool(result.get('contract_pinned')))}",
        ]
    if command == "replay":
        return _replayed(adapter_id, result)
    if command == "promote":
        return _promoted(adapter_id, result)
    if command == "demote":
        return [
            f"demoted {adapter_id}: now {result.get('state')}",
            f"next: baton gateway promote {adapter_id}",
        ]
    if command in ("allow", "deny"):
        return [
            f"{adapter_id}: allowed {', '.join(result.get('allowed') or []) or 'nothing'}; "
            f"approval required for {', '.join(result.get('approval_required') or []) or 'none'}; "
            f"{len(result.get('denied') or [])} denied",
            f"next: {result.get('next')}",
        ]
    if command == "names":
        how = "under their own names" if result.get("unprefixed") else f"as {adapter_id}__TOOL"
        return [
            f"{adapter_id}: tools served {how}: {', '.join(result.get('tools') or []) or 'none allowed'}",
            f"next: {result.get('next')}",
        ]
    return [f"{command} {adapter_id}: done"]


def _locked(adapter_id: str, result: dict[str, Any]) -> list[str]:
    """What was pinned and where, and which install scripts were left out."""
    packages = result.get("packages") or {}
    skipped = result.get("without_install_scripts") or []
    lines = [f"locked {adapter_id}: {len(packages)} package(s) pinned, bundle at {result.get('bundle')}"]
    lines.append(f"policy: {result.get('policy_path')}")
    if skipped:
        lines.append(f"runs without the install scripts of: {', '.join(skipped)}")
    return [*lines, f"next: baton gateway verify {adapter_id}"]


def _replayed(adapter_id: str, result: dict[str, Any]) -> list[str]:
    """A check-mode plan, or what the server turned out to be, its findings and what to do about them."""
    if result.get("status") == "completed_check_mode_no_runtime_execution":
        argv = " ".join(str(a) for a in result.get("argv") or [])
        return [
            f"plan for {adapter_id} ({result.get('sandbox')}): {argv}",
            f"next: baton gateway replay {adapter_id} --apply",
        ]
    observation = result.get("protocol_observation") or {}
    allowed = list(observation.get("adapter_allowed_tools") or [])
    lines = [
        f"replayed {adapter_id}: {observation.get('server_name')} {observation.get('server_version')}, "
        f"{observation.get('tool_count')} tool(s) match the pinned contract",
        f"allowed: {', '.join(allowed) or 'none'}; denied: {observation.get('adapter_denied_tool_count', 0)}",
    ]
    findings = result.get("poisoning_findings") or []
    lines += [f"finding {f['id']}: {f['tool']} ({f['where']}): {f['detail']}" for f in findings]
    nxt = f"baton gateway promote {adapter_id}" if allowed else f"baton gateway allow {adapter_id} TOOL…"
    if findings and allowed:
        nxt += " " + " ".join(f"--accept-finding {f['id']}" for f in findings) + "   (once you judged them)"
    return [*lines, f"next: {nxt}"]


def _promoted(adapter_id: str, result: dict[str, Any]) -> list[str]:
    """What is served now, which calls wait for a human, and how the policy changed."""
    tools = list(result.get("allowed_tools") or [])
    approval = list(result.get("approval_required") or [])
    lines = [f"promoted {adapter_id}: serving {', '.join(tools) or 'nothing'}"]
    if approval:
        lines.append(f"each call waits for a human: {', '.join(approval)}")
    lines += list(result.get("diff_lines") or [])
    named = "under their own names" if result.get("unprefixed") else f"as {adapter_id}__TOOL"
    return [*lines, f"next: baton serve (its tools are listed {named})"]


#: ``lock``'s parameters in the order its flags are printed, with the flag each one is.
FLAGS = (
    ("adapter_id", "--id"),
    ("argument", "--argument"),
    ("constraint", "--constraint"),
    ("mount", "--mount"),
    ("env", "--env"),
    ("entrypoint", "--entrypoint"),
    ("host_program", "--host-program"),
    ("allow_without_install_scripts", "--allow-without-install-scripts"),
    ("max_wheel_mb", "--max-wheel-mb"),
)


def lock_command(given: dict[str, Any]) -> str:
    """``baton gateway lock …`` with exactly the parameters in ``given``, quoted for a POSIX shell."""
    words = ["baton", "gateway", "lock", str(given["target"])]
    for key, flag in FLAGS:
        value = given.get(key)
        values = value if isinstance(value, list) else [] if value is None else [value]
        for item in values:
            words += [flag, str(item)]
    if given.get("replace"):
        words.append("--replace")
    return shlex.join(words)


def lock_advice(exc: BatonError, given: dict[str, Any]) -> str | None:
    """The lock command that passes ``exc``'s check, or None when no flag of lock can."""
    details = exc.details
    if exc.error_class == "artifact_no_entrypoint" and details.get("entrypoints"):
        return lock_command({**given, "entrypoint": details["entrypoints"][0]})
    if exc.error_class == "artifact_install_script_refused" and details.get("accept"):
        accepted = [*(given.get("allow_without_install_scripts") or []), str(details["accept"])]
        return lock_command({**given, "allow_without_install_scripts": accepted})
    if exc.error_class == "artifact_archive_limits_exceeded" and details.get("max_wheel_mb"):
        return lock_command({**given, "max_wheel_mb": details["max_wheel_mb"]})
    return None
