"""``baton gateway allow`` / ``deny``: move tools between allowed and denied, checked at once against the
pinned contract (an unknown tool is named), the destructive-tool rule applied before anything is written."""

from __future__ import annotations

import shlex
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


def _check_exemptions(policy: Policy, names: list[str], known: dict[str, Any]) -> None:
    """``--without-approval`` names destructive tools only: on any other tool it would exempt nothing."""
    harmless = [n for n in names if checks.destructive_reason(n, known[n].get("annotations")) is None]
    if harmless:
        raise GatewayError(
            "adapter_policy_invalid",
            f"--without-approval exempts destructive tools from approval; {', '.join(harmless)} of adapter "
            f"{policy.id} is not destructive: allow it without the flag.",
            field="tools.allow_destructive_without_approval",
        )


def change_tools(
    runtime: Runtime,
    adapter: str,
    names: list[str],
    *,
    allow: bool,
    approval: bool = False,
    without_approval: bool = False,
) -> dict[str, Any]:
    """Allow (behind a human approval, or destructive ones explicitly without) or deny ``names``; writes the
    policy only if all of it holds."""
    if not names:
        raise GatewayError("adapter_policy_invalid", "Name at least one tool.", field="tools")
    if approval and without_approval:
        raise GatewayError("invalid_arguments", "--approval and --without-approval contradict each other.")
    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path)
    known = pinned_tools(runtime, policy)
    _unknown(policy, names, known)
    if without_approval:
        _check_exemptions(policy, names, known)
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
        if without_approval:
            exempt += names
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
        exc.message += (
            " Allow it with --approval (a human approves each call), or, as its owner's explicit choice, "
            "with --without-approval."
        )
        exc.details["next"] = shlex.join(["baton", "gateway", "allow", policy.id, *names, "--approval"])
        raise
    checksum = write_policy(path, updated)
    return {
        "adapter_id": policy.id,
        "allowed": updated.tools.allowed,
        "denied": updated.tools.denied,
        "approval_required": updated.tools.approval_required,
        "allow_destructive_without_approval": updated.tools.allow_destructive_without_approval,
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


def change_network(runtime: Runtime, adapter: str, origins: list[str], *, none: bool) -> dict[str, Any]:
    """Grant egress at run time to exactly ``origins`` (``network = "allowlist"``), or none at all."""
    from pydantic import ValidationError

    from baton.gateway.policy.policy_files import validation_failure
    from baton.gateway.policy.policy_runtime import RuntimeSpec

    if none == bool(origins):
        raise GatewayError(
            "invalid_arguments", "Name the origins to allow (scheme://host[:port]), or --none; not both."
        )
    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path)
    chosen = list(dict.fromkeys(o.rstrip("/") for o in origins))
    update = {"network": "none" if none else "allowlist", "allowed_origins": chosen}
    try:
        spec = RuntimeSpec.model_validate({**policy.runtime.model_dump(), **update})
    except ValidationError as exc:
        raise validation_failure(exc, "The network setting", at="runtime.") from None
    checksum = write_policy(path, policy.model_copy(update={"runtime": spec}))
    return {
        "adapter_id": policy.id,
        "network": spec.network,
        "allowed_origins": spec.allowed_origins,
        "policy_checksum": checksum,
        "next": f"baton gateway replay {policy.id} --apply",
    }
