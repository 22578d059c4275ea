"""``baton gateway allow`` / ``deny``: move tools between allowed and denied, checked at once against the
pinned contract (an unknown tool is named), the destructive-tool rule applied before anything is written."""

from __future__ import annotations

from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy import checks, state
from baton.gateway.policy.contract import tool_contract
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import load_policy, policy_path, write_policy
from baton.runtime import Runtime


def pinned_tools(runtime: Runtime, policy: Policy) -> dict[str, dict[str, Any]]:
    """The tool definitions of the replay that pinned the policy's contract, by name."""
    from baton.gateway.policy.bookkeeping import replayed_definitions

    if policy.contract is None:
        raise GatewayError(
            "adapter_contract_unpinned",
            f"Adapter {policy.id} pins no contract yet; run baton gateway replay {policy.id} --apply "
            "--record-contract first, so its tools are known.",
        )
    row = state.get_adapter(runtime, policy.id) or {}
    definitions = replayed_definitions(runtime, policy.id, row)
    if (
        not definitions
        or tool_contract(definitions).tool_name_set_sha256 != policy.contract.tool_name_set_sha256
    ):
        raise GatewayError(
            "adapter_contract_unpinned",
            f"The last replay of {policy.id} did not record the pinned contract's tools; run baton gateway "
            f"replay {policy.id} --apply.",
        )
    return {d["name"]: d for d in definitions}


def _unknown(policy: Policy, names: list[str], known: dict[str, Any]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise GatewayError(
            "adapter_policy_invalid",
            f"Adapter {policy.id} has no tool {', '.join(unknown)} in its pinned contract. "
            f"Its tools: {', '.join(sorted(known))}.",
            field="tools",
            unknown_tools=unknown,
        )


def change_tools(
    runtime: Runtime, adapter: str, names: list[str], *, allow: bool, approval: bool = False
) -> dict[str, Any]:
    """Allow (optionally behind a human approval) or deny ``names``; writes the policy only if all is well."""
    if not names:
        raise GatewayError("adapter_policy_invalid", "Name at least one tool.", field="tools")
    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path)
    known = pinned_tools(runtime, policy)
    _unknown(policy, names, known)
    tools = policy.tools
    chosen = set(names)
    allowed = [t for t in tools.allowed if t not in chosen]
    denied = [t for t in tools.denied if t not in chosen]
    approval_required = [t for t in tools.approval_required if t not in chosen]
    exempt = [t for t in tools.allow_destructive_without_approval if t not in chosen]
    if allow:
        allowed += names
        if approval:
            approval_required += names
    else:
        denied += names
    updated = policy.model_copy(
        update={
            "tools": tools.model_copy(
                update={
                    "allowed": sorted(allowed),
                    "denied": sorted(denied),
                    "approval_required": sorted(approval_required),
                    "allow_destructive_without_approval": sorted(exempt),
                }
            )
        }
    )
    try:
        checks.check_destructive_tools(updated, known.values())
    except GatewayError as exc:
        exc.message += " Allow it with --approval (a human approves each call)."
        raise
    checksum = write_policy(path, updated)
    return {
        "adapter_id": policy.id,
        "allowed": updated.tools.allowed,
        "denied": updated.tools.denied,
        "approval_required": updated.tools.approval_required,
        "policy_checksum": checksum,
        "next": f"baton gateway replay {policy.id} --apply",
    }


def change_naming(runtime: Runtime, adapter: str, *, unprefixed: bool) -> dict[str, Any]:
    """Serve the adapter's tools under their own names (or prefixed again); a collision is refused at once."""
    from baton.gateway.serving.names import check_promotable, served_name

    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path)
    updated = policy.model_copy(
        update={"serving": policy.serving.model_copy(update={"unprefixed": unprefixed})}
    )
    check_promotable(runtime, updated)
    checksum = write_policy(path, updated)
    return {
        "adapter_id": policy.id,
        "unprefixed": unprefixed,
        "tools": [served_name(updated, tool) for tool in updated.tools.allowed],
        "policy_checksum": checksum,
        "next": f"baton gateway replay {policy.id} --apply",
    }
