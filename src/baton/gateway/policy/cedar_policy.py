"""Per-call policy as code: an optional Cedar policy per adapter, evaluated with ``cedarpy`` at each call.

The request is principal ``Agent::"<name>"`` (the calling agent, :func:`baton.identity.agents.current_agent`: a named
agent over HTTP; over stdio ``BATON_AGENT_NAME``, else the client's claim ``stdio:<clientInfo.name>``, which
is never a registered agent's name; ``client`` when none is known), action ``Action::"<tool>"``,
resource ``Adapter::"<adapter id>"`` and context ``{"arguments": {...}, "path_escapes": bool}``: the
arguments with every path canonical (:mod:`~baton.gateway.policy.paths`, what the server then receives)
and whether a path left its root. The answer is permit, forbid,
or permit with approval (a permitting policy annotated ``@approvals("N")``: the proxy's human request
needs N distinct people). A policy's ``@id("…")`` names it in reasons and errors. When an adapter has a
policy, anything not permitted is forbidden (Cedar's default deny); an evaluation error or a policy
that does not parse forbids too (fails closed), even where Cedar itself would skip the failing policy. The policy file is ``adapters/<id>.cedar``; its sha256
is pinned in the adapter's TOML (``tools.call_policy_sha256``), snapshotted by ``promote`` and written
into every ``gateway_call`` receipt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from baton.errors import GatewayError
from baton.gateway.policy.paths import canonical_arguments
from baton.gateway.policy.policy_runtime import Mount

SNAPSHOT_NAME = "call-policy.cedar"
DEFAULT_PRINCIPAL = "client"


@dataclass(frozen=True)
class CallDecision:
    """The policy's answer for one call."""

    effect: Literal["permit", "forbid", "approval"]
    approvals: int = 0
    reasons: list[str] = field(default_factory=list)
    policy_sha256: str | None = None


def policy_file(policy_toml: Path) -> Path:
    """``adapters/<id>.cedar`` beside ``adapters/<id>.toml``."""
    return policy_toml.with_suffix(".cedar")


def sha256_of(text: str) -> str:
    """The pin of a policy text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _error(message: str, **details: Any) -> GatewayError:
    return GatewayError("gateway_policy_error", message, **details)


def policy_annotations(text: str) -> dict[str, dict[str, str]]:
    """Each policy's annotations by Cedar's policy id (``policy0``…); raises when the text does not parse."""
    import cedarpy

    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except Exception as exc:  # cedarpy raises ValueError/RuntimeError variants for a bad policy
        raise _error(f"The Cedar policy does not parse: {str(exc)[:300]}") from None
    static = parsed.get("staticPolicies") or {}
    result = {}
    for policy_id, body in static.items():
        found = body.get("annotations") or {}
        approvals = found.get("approvals")
        if approvals is not None and not (
            isinstance(approvals, str) and approvals.isdigit() and 1 <= int(approvals) <= 10
        ):
            raise _error(f"@approvals of {policy_id} must be a number from 1 to 10, not {approvals!r}.")
        result[policy_id] = {str(k): str(v) for k, v in found.items()}
    return result


def read_pinned(path: Path, pinned: str | None) -> str | None:
    """The policy text at ``path`` when the adapter pins one (None when it pins none); refused when absent or changed."""
    if pinned is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise _error(f"The pinned Cedar policy {path.name} is missing.", path=str(path)) from None
    if sha256_of(text) != pinned:
        raise _error(
            f"The Cedar policy {path.name} differs from the pinned one; pin it again (baton gateway policy pin).",
            path=str(path),
        )
    return text


def cedar_request(
    adapter_id: str, tool: str, arguments: dict[str, Any], principal: str, path_escapes: bool = False
) -> dict[str, Any]:
    """The Cedar request of one call (canonical path arguments, whether one leaves its root), as the call
    policy and every standing grant see it."""
    return {
        "principal": f'Agent::"{json.dumps(principal)[1:-1]}"',
        "action": f'Action::"{json.dumps(tool)[1:-1]}"',
        "resource": f'Adapter::"{adapter_id}"',
        "context": {"arguments": arguments, "path_escapes": path_escapes},
    }


def decide(
    text: str,
    adapter_id: str,
    tool: str,
    arguments: dict[str, Any],
    principal: str = DEFAULT_PRINCIPAL,
    path_escapes: bool = False,
    entities: list[dict[str, Any]] | None = None,
) -> CallDecision:
    """Evaluate one call (``entities``: what the principal's attributes are, e.g. a subagent's
    ``delegated_by``); forbid (``gateway_policy_forbidden``) or an error (``gateway_policy_error``) raise."""
    import cedarpy

    marks = policy_annotations(text)
    request = cedar_request(adapter_id, tool, arguments, principal, path_escapes)
    sha = sha256_of(text)
    try:
        result = cedarpy.is_authorized(request, text, entities or [])
    except Exception as exc:  # an argument Cedar cannot represent (a float), a malformed request
        raise _error(
            f"The Cedar policy could not evaluate this call: {str(exc)[:300]}", policy_sha256=sha
        ) from None
    errors = list(result.diagnostics.errors)
    if errors:
        raise _error(
            f"The Cedar policy failed on this call (so it is refused): {'; '.join(errors)[:300]}",
            policy_sha256=sha,
        )
    matched = sorted(result.diagnostics.reasons)
    reasons = [marks.get(r, {}).get("id", r) for r in matched]  # a policy's @id names it, else Cedar's id
    if result.decision != cedarpy.Decision.Allow:
        why = f"forbidden by {', '.join(reasons)}" if reasons else "no policy permits it (default deny)"
        raise GatewayError(
            "gateway_policy_forbidden",
            f"The call policy of adapter {adapter_id} refuses {tool}: {why}.",
            adapter_id=adapter_id,
            tool=tool,
            policy_sha256=sha,
            reasons=reasons,
        )
    approvals = max((int(marks.get(r, {}).get("approvals", "0")) for r in matched), default=0)
    return CallDecision("approval" if approvals else "permit", approvals, reasons, sha)


def dry_run(
    text: str, adapter_id: str, calls: list[dict[str, Any]], mounts: Sequence[Mount] = ()
) -> list[dict[str, Any]]:
    """``policy test``: each recorded call's decision on its canonical paths, nothing sent anywhere."""
    rows = []
    for index, call in enumerate(calls, start=1):
        tool, arguments = call.get("tool"), call.get("arguments", {})
        principal = call.get("principal", DEFAULT_PRINCIPAL)
        if not isinstance(tool, str) or not isinstance(arguments, dict) or not isinstance(principal, str):
            rows.append(
                {
                    "line": index,
                    "decision": "error",
                    "error_class": "invalid_arguments",
                    "reason": "a line is {tool, arguments, principal?}",
                }
            )
            continue
        try:
            judged = canonical_arguments(arguments, mounts)
            decision = decide(text, adapter_id, tool, judged.arguments, principal, judged.path_escapes)
        except GatewayError as exc:
            effect = "forbid" if exc.error_class == "gateway_policy_forbidden" else "error"
            rows.append(
                {
                    "line": index,
                    "tool": tool,
                    "decision": effect,
                    "error_class": exc.error_class,
                    "reason": exc.message,
                }
            )
            continue
        rows.append(
            {
                "line": index,
                "tool": tool,
                "decision": decision.effect,
                "approvals": decision.approvals,
                "reasons": decision.reasons,
            }
        )
    return rows


def check_call(
    policy: Any,
    snapshot: Path,
    tool: str,
    arguments: dict[str, Any],
    principal: str | None = None,
    path_escapes: bool = False,
) -> CallDecision:
    """The served adapter's call policy on one call by ``principal`` (the calling agent's name; permit when
    the adapter pins no policy), its ``arguments`` already canonical; forbids and errors raise."""
    if policy.tools.call_policy_sha256 is None:  # before any path is built: the common case, every call
        return CallDecision("permit")
    text = read_pinned(snapshot / SNAPSHOT_NAME, policy.tools.call_policy_sha256)
    if text is None:
        return CallDecision("permit")
    return decide(text, policy.id, tool, arguments, principal or DEFAULT_PRINCIPAL, path_escapes)


def pin(runtime: Any, adapter: str, source: str | None = None) -> dict[str, Any]:
    """``policy pin``: check the Cedar file parses, put it beside the TOML and pin its sha256 there."""
    from baton.gateway.policy.policy_files import load_policy, policy_path, write_policy

    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path)
    target = policy_file(path)
    origin = Path(source).expanduser() if source else target
    try:
        text = origin.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise _error(f"No readable Cedar policy at {origin}.", path=str(origin)) from None
    found = policy_annotations(text)
    if not found:
        raise _error(f"{origin} holds no Cedar policy.")
    if origin.resolve() != target.resolve():
        target.write_text(text, encoding="utf-8")
    from baton.evidence.policy_archive import keep

    sha = keep(runtime.settings, text.encode("utf-8"), "cedar")  # every version pinned stays findable
    checksum = write_policy(
        path, policy.model_copy(update={"tools": policy.tools.model_copy(update={"call_policy_sha256": sha})})
    )
    return {
        "adapter_id": policy.id,
        "call_policy": str(target),
        "call_policy_sha256": sha,
        "policies": len(found),
        "policy_checksum": checksum,
        "next": f"baton gateway replay {policy.id} --apply",
    }


def test_calls(runtime: Any, adapter: str, calls_file: str) -> dict[str, Any]:
    """``policy test``: the adapter's pinned call policy over a JSONL file of calls; nothing runs."""
    from baton.gateway.policy.policy_files import load_policy, policy_path

    path = policy_path(runtime.settings, adapter)
    policy, _ = load_policy(path, check_expiry=False)
    text = read_pinned(policy_file(path), policy.tools.call_policy_sha256)
    if text is None:
        raise _error(
            f"Adapter {policy.id} pins no call policy; write {policy_file(path).name} and run policy pin."
        )
    calls = []
    try:
        lines = Path(calls_file).expanduser().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        raise GatewayError("invalid_arguments", f"No readable calls file at {calls_file}.") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            raise GatewayError("invalid_arguments", f"Line {number} of {calls_file} is not JSON.") from None
        calls.append(value if isinstance(value, dict) else {})
    return {
        "adapter_id": policy.id,
        "call_policy_sha256": sha256_of(text),
        "calls": dry_run(text, policy.id, calls, policy.runtime.mounts),
    }
