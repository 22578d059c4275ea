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
        exempt = result.get("allow_destructive_without_approval") or []
        return [
            f"{adapter_id}: allowed {', '.join(result.get('allowed') or []) or 'nothing'}; "
            f"approval required for {', '.join(result.get('approval_required') or []) or 'none'}; "
            f"{len(result.get('denied') or [])} denied",
            *([f"destructive without approval (the owner's choice): {', '.join(exempt)}"] if exempt else []),
            f"next: {result.get('next')}",
        ]
    if command == "network":
        origins = ", ".join(result.get("allowed_origins") or [])
        shown = f"allowlist: {origins}" if result.get("network") == "allowlist" else "none"
        return [f"{adapter_id}: network at run time: {shown}", f"next: {result.get('next')}"]
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
    pin = result.get("interpreter") or {}
    if pin.get("package"):
        lines.append(
            f"runs on node {pin.get('version')} from the registry ({pin.get('package')}, in the bundle)"
        )
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


def _names(names: list[str], limit: int = 10) -> str:
    """At most ``limit`` names, then how many more."""
    shown = ", ".join(names[:limit])
    return shown + (f" … and {len(names) - limit} more" if len(names) > limit else "")


def _promoted(adapter_id: str, result: dict[str, Any]) -> list[str]:
    """Counts, the risky tools, the findings accepted and the names that changed; ``--json`` has the rest."""
    tools = list(result.get("allowed_tools") or [])
    approval = list(result.get("approval_required") or [])
    denied = int(result.get("denied_count") or 0)
    lines = [
        f"promoted {adapter_id}: serving {len(tools)} tool(s), {denied} denied: {_names(tools) or 'nothing'}"
    ]
    if approval:
        lines.append(f"each call waits for a human: {_names(approval)}")
    for risky in result.get("risky_tools") or []:
        how = "each call approved by a human" if risky.get("approval") else "exempted from approval"
        lines.append(f"risky: {risky.get('tool')} ({risky.get('reason')}; {how})")
    for finding in result.get("accepted_findings") or []:
        lines.append(f"finding accepted: {finding.get('id')} ({finding.get('tool')}: {finding.get('kind')})")
    changes = result.get("tools_diff") or {}
    changed = [f"{n} ({', '.join(f)})" for n, f in (changes.get("changed") or {}).items()]
    if changes.get("added") or changes.get("removed") or changed:
        lines.append(
            f"tools added: {_names(list(changes.get('added') or [])) or 'none'}; "
            f"removed: {_names(list(changes.get('removed') or [])) or 'none'}; changed: {_names(changed) or 'none'}"
        )
        lines.append("(the full diff of the definitions: --json, diff_unified)")
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
    ("node", "--node"),
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
    if exc.error_class == "adapter_runtime_unavailable" and details.get("node"):
        return lock_command({**given, "node": details["node"]})
    if exc.error_class == "adapter_policy_exists":
        return lock_command({**given, "replace": True})
    return None


#: Below this width ``gateway list`` prints one line per adapter with its details indented under it.
WIDE_LIST_COLUMNS = 140


def list_cells(row: dict[str, Any]) -> dict[str, str]:
    """One adapter of ``gateway list`` as the texts it shows: id, state, contract and the details."""
    blocked = "blocked" in (row["state"], row.get("next_version_state"))
    mounts = "; ".join(
        f"{m.get('host')} -> {m.get('sandbox')} ({m.get('mode', 'ro')})"
        for m in row.get("mounts") or []
        if isinstance(m, dict)
    )
    shown = row["state"] + (f" (next: {row['next_version_state']})" if row.get("next_version_state") else "")
    return {
        "adapter": str(row["adapter_id"]),
        "state": shown,
        "contract": "pinned" if row["contract_pinned"] else "unpinned",
        "mounts": mounts,
        "constraints": ", ".join(str(c) for c in row.get("constraints") or []),
        "findings": ", ".join(f"{f.get('id')}" for f in row.get("poisoning_findings") or []),
        "reason": f"{row['error_class']}: {row['block_reason']}" if blocked else "",
    }


def narrow_list(rows: list[dict[str, str]], width: int) -> list[str]:
    """``gateway list`` for a narrow screen: one line per adapter (its id whole), then its non-empty details,
    each indented and wrapped between words, so twelve plain adapters take thirteen lines."""
    import textwrap

    id_width = max(len("adapter"), *(len(r["adapter"]) for r in rows))
    state_width = max(len("state"), *(len(r["state"]) for r in rows))
    lines = [f"{'adapter':<{id_width}}  {'state':<{state_width}}  contract"]
    for row in rows:
        line = f"{row['adapter']:<{id_width}}  {row['state']:<{state_width}}  {row['contract']}"
        if len(line) > width:  # a long id keeps its own line; the rest goes under it
            lines += [row["adapter"], f"  {row['state']}, contract {row['contract']}"]
        else:
            lines.append(line)
        for key in ("reason", "findings", "mounts", "constraints"):
            if row[key]:
                lines += textwrap.wrap(
                    f"{key}: {row[key]}",
                    width=max(width, 20),
                    initial_indent="  ",
                    subsequent_indent="    ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
    return lines
