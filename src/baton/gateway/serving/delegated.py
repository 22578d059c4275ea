"""A subagent's delegation at the gateway: ``read_only`` by the pinned annotations, and its argument predicates.

The tool boundary already refused a tool outside the subagent's delegation
(:meth:`baton.boundary.toolkit.OnBehalf.refusal`); what only the gateway knows is checked here, on the
version it serves now: a read-only subagent calls only tools whose pinned annotations say
``readOnlyHint: true`` (a tool without one is not read-only), and every Cedar argument predicate of its
chain (:mod:`baton.subagents.delegating`) must permit the call, evaluated by the same
:func:`~baton.gateway.policy.cedar_policy.decide` as the adapter's own per-call policy, with the subagent
as principal and the one that delegated to it as its ``delegated_by`` attribute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.errors import GatewayError, SubagentError
from baton.gateway.policy.cedar_policy import decide, sha256_of

if TYPE_CHECKING:
    from baton.boundary.toolkit import OnBehalf


def check(
    adapter_id: str,
    definition: dict[str, Any],
    tool: str,
    arguments: dict[str, Any],
    on_behalf: OnBehalf | None,
    path_escapes: bool = False,
) -> None:
    """Refuse a subagent's call that its delegation does not cover (``subagent_tool_not_allowed`` for a
    write by a read-only subagent, ``gateway_policy_forbidden`` for a predicate, which sees the canonical
    arguments and ``context.path_escapes`` as the call policy does); nothing for an agent's."""
    if on_behalf is None or not on_behalf.delegation:
        return
    chain = on_behalf.delegation
    last = chain[-1]
    if last.get("read_only") and (definition.get("annotations") or {}).get("readOnlyHint") is not True:
        raise SubagentError(
            "subagent_tool_not_allowed",
            f"Subagent {on_behalf.subagent_id} is read-only, and the pinned contract of adapter {adapter_id} "
            f"does not mark {tool} read-only.",
            adapter_id=adapter_id,
            tool=tool,
            read_only=True,
        )
    delegated_by = str(chain[-2]["principal"]) if len(chain) > 1 else on_behalf.parent_agent
    entities = [
        {
            "uid": {"type": "Agent", "id": on_behalf.subagent_id},
            "attrs": {
                "delegated_by": {"__entity": {"type": "Agent", "id": delegated_by}},
                "depth": int(last.get("depth") or 0),
            },
            "parents": [],
        }
    ]
    for sha in last.get("predicates") or []:
        text = on_behalf.policies.get(sha)
        if text is None or sha256_of(text) != sha:
            raise GatewayError(
                "gateway_policy_error",
                f"An argument predicate of subagent {on_behalf.subagent_id} is missing or changed; the call is refused.",
                predicate_sha256=sha,
            )
        decide(text, adapter_id, tool, arguments, on_behalf.subagent_id, path_escapes, entities)
