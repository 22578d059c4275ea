"""A spawn's authority: what its parent holds, narrowed by what it asks for, as one more delegation link.

The parent is the spawning agent (the chain's root, depth 0: whatever the server lets it use) or, for a
nested spawn, the subagent whose tool call spawns (its stored chain). The new link holds the intersection:
tools (refused, not dropped, when the parent lacks one), adapters, ``read_only`` (once set, for good), the
Cedar argument predicates (the parent's and its own), the token and cost budgets (at most the parent's
remaining and today's room), the deadline, and a depth under ``BATON_SUBAGENT_MAX_DEPTH``. The tool
boundary and the gateway enforce it on every call (:meth:`baton.boundary.toolkit.OnBehalf.refusal`,
:mod:`baton.gateway.serving.delegated`); the chain rides in every receipt of the subagent's actions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from baton import clock
from baton.delegation import make_link
from baton.errors import ArgumentError, BudgetError, SubagentError
from baton.evidence.canonical import sha256_hex
from baton.subagents import table
from baton.subagents.governed import SUBAGENT_BUILTINS

if TYPE_CHECKING:
    from baton.boundary.toolkit import OnBehalf, ToolRegistry
    from baton.models.budgets import DailyBudget
    from baton.runtime import Runtime

#: The one built-in that hands authority on (a subagent given it may spawn, up to the depth cap).
SPAWN_TOOL = "mcp_spawn_subagent"


@dataclass(frozen=True)
class Delegation:
    """A subagent's chain (agent first, the subagent last) and its predicates' Cedar texts by sha256."""

    chain: list[dict[str, Any]]
    policies: dict[str, str] = field(default_factory=dict)

    @property
    def ancestors(self) -> list[str]:
        """The subagents above this one (whose budgets its spend counts in), nearest last."""
        return [str(link["principal"]) for link in self.chain[1:-1]]

    def stored(self) -> dict[str, Any]:
        """The ``subagents.delegation`` value."""
        return {"chain": self.chain, "policies": self.policies}

    @classmethod
    def from_stored(cls, value: Any) -> Delegation | None:
        """The stored value (None: a subagent stored before delegations were kept)."""
        if not isinstance(value, dict) or not value.get("chain"):
            return None
        return cls(list(value["chain"]), dict(value.get("policies") or {}))

    @classmethod
    def of_caller(cls, on_behalf: OnBehalf | None) -> Delegation | None:
        """The delegation of the subagent whose tool call spawns (None: an agent spawns)."""
        if on_behalf is None or not on_behalf.delegation:
            return None
        return cls(list(on_behalf.delegation), dict(on_behalf.policies))


@dataclass(frozen=True)
class Narrowed:
    """A spawn's link before its subagent has an id: the chain above it and the fields it holds."""

    above: list[dict[str, Any]]
    policies: dict[str, str]
    fields: dict[str, Any]

    def for_subagent(self, subagent_id: str) -> Delegation:
        """The subagent's whole chain, its own link last."""
        link = make_link(self.above[-1], principal=subagent_id, **self.fields)
        return Delegation([*self.above, link], self.policies)


@dataclass(frozen=True)
class Asked:
    """What a spawn asks for, of what a delegation bounds."""

    agent: str
    tools: list[str]
    read_only: bool = False
    constraints: dict[str, str] | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: int | None = None


def narrow(
    runtime: Runtime,
    registry: ToolRegistry | None,
    daily: DailyBudget,
    asked: Asked,
    parent: Delegation | None,
) -> Narrowed:
    """The intersection of the parent's authority and what is ``asked``; refuses a tool the parent may not
    give, a nesting past the cap, and a budget or wall time the parent has no room left for."""
    above = parent.chain if parent is not None else [root_link(asked.agent)]
    before = above[-1]
    depth, cap = int(before["depth"]) + 1, runtime.settings.baton_subagent_max_depth
    if depth > cap:
        raise SubagentError(
            "subagent_tool_not_allowed",
            f"Subagents nest at most {cap} deep (BATON_SUBAGENT_MAX_DEPTH); this spawn would be at {depth}.",
            depth=depth,
            max_depth=cap,
        )
    read_only = asked.read_only or bool(before.get("read_only"))
    _check_tools(registry, asked.tools, before, read_only, depth < cap)
    policies = dict(parent.policies) if parent is not None else {}
    predicates = list(before.get("predicates") or [])
    if asked.constraints:
        text = compile_predicates(asked.constraints, asked.tools, registry)
        sha = sha256_hex(text)
        policies[sha] = text
        predicates.append(sha)
    tokens, cost = _budgets(runtime, daily, asked, before)
    fields = {
        "tools": sorted(asked.tools),
        "adapters": sorted({a for name in asked.tools if (a := adapter_of(name, registry)) is not None}),
        "read_only": read_only,
        "predicates": predicates,
        "max_total_tokens": tokens,
        "max_cost_usd": cost,
        "deadline": _deadline(asked.max_seconds, before.get("deadline")),
    }
    return Narrowed(above, policies, fields)


def root_link(agent: str) -> dict[str, Any]:
    """The chain's root for ``agent`` (depth 0, whatever the server lets it use): the same for every spawn
    of the agent, so hashed once (each spawn gets its own copy)."""
    link = _root_link(agent)
    return {**link, "predicates": list(link["predicates"])}


@lru_cache(maxsize=1024)
def _root_link(agent: str) -> dict[str, Any]:
    return make_link(None, principal=agent)


def read_only_tools(registry: ToolRegistry) -> set[str]:
    """The tools a read-only subagent may be given: the subagent built-ins marked read-only, and each live
    adapter's allowed tools whose pinned annotations say ``readOnlyHint: true`` (no pinned annotation: not
    read-only)."""
    names = {name for name in SUBAGENT_BUILTINS if name in registry.tools and registry.tools[name].read_only}
    proxy = registry.runtime.services.get("gateway_proxy")
    if proxy is not None:
        for adapter in list(proxy.adapters.values()):
            current, live = proxy.current(adapter)
            if live and current.block is None:
                names.update(
                    f"{current.id}__{tool}"
                    for tool, pinned in current.definitions.items()
                    if (pinned.get("annotations") or {}).get("readOnlyHint") is True
                )
    return names


def adapter_of(name: str, registry: ToolRegistry | None) -> str | None:
    """The adapter id of a tool name (None: a built-in)."""
    if registry is not None and name in registry.tools:
        return None
    adapter_id, sep, _ = name.partition("__")
    return adapter_id if sep else None


def _check_tools(
    registry: ToolRegistry | None, names: list[str], before: dict[str, Any], read_only: bool, may_spawn: bool
) -> None:
    """``subagent_tool_not_allowed`` naming every tool outside the parent's, not read-only under
    ``read_only``, or the spawn tool at the depth cap."""
    held = before.get("tools")
    allowed = set(held) if held is not None else None
    if read_only:
        readable = read_only_tools(registry) | {SPAWN_TOOL} if registry is not None else set()
        allowed = readable if allowed is None else allowed & readable
    refused = [
        n for n in names if (allowed is not None and n not in allowed) or (n == SPAWN_TOOL and not may_spawn)
    ]
    if refused:
        why = "its parent's delegation does not hold them" + (
            ", or they are not read-only" if read_only else ""
        )
        raise SubagentError(
            "subagent_tool_not_allowed",
            f"A subagent cannot be given {', '.join(refused)}: {why} (a subagent at the depth cap cannot spawn).",
            refused=refused,
            permitted=sorted(allowed - ({SPAWN_TOOL} if not may_spawn else set()))
            if allowed is not None
            else None,
        )


def compile_predicates(constraints: dict[str, str], tools: list[str], registry: ToolRegistry | None) -> str:
    """The Cedar policy of a spawn's argument predicates: per tool, forbid unless its condition holds; all
    else permitted (the adapter's own policy and the parents' predicates still apply)."""
    lines = []
    for name, condition in sorted(constraints.items()):
        adapter_id = adapter_of(name, registry)
        if name not in tools or adapter_id is None:
            raise ArgumentError(
                "invalid_arguments",
                f"constraints names {name}, which is not one of the spawn's adapter tools.",
                tool=name,
            )
        tool = name.partition("__")[2]
        lines.append(
            f"@id({json.dumps(name)})\nforbid(principal, action == Action::{json.dumps(tool)}, "
            f"resource == Adapter::{json.dumps(adapter_id)}) unless {{ {condition} }};"
        )
    lines.append('@id("delegation")\npermit(principal, action, resource);')
    text = "\n".join(lines) + "\n"
    _check_parses(text, len(constraints))
    return text


def _check_parses(text: str, forbids: int) -> None:
    """Refuse (``invalid_arguments``) predicates that do not parse, or that add policies of their own."""
    import cedarpy

    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except Exception as exc:  # cedarpy raises ValueError/RuntimeError variants for a bad policy
        raise ArgumentError(
            "invalid_arguments", f"A constraint is not a Cedar condition: {str(exc)[:300]}"
        ) from None
    effects = sorted(body.get("effect") for body in (parsed.get("staticPolicies") or {}).values())
    if effects != ["forbid"] * forbids + ["permit"]:
        raise ArgumentError("invalid_arguments", "Each constraint must be one Cedar condition, not policies.")


def _least(*values: Any) -> Any:
    """The smallest of the limits given (None: no limit)."""
    present = [value for value in values if value is not None]
    return min(present) if present else None


def _budgets(
    runtime: Runtime, daily: DailyBudget, asked: Asked, before: dict[str, Any]
) -> tuple[int | None, float | None]:
    """The spawn's token and cost budgets: at most what it asks, its parent's remaining and today's room
    (asked for nothing, it inherits its parent's remaining)."""
    left_tokens, left_cost = _parent_left(runtime, before)
    day_tokens, day_cost = _day_room(daily)
    tokens = _least(asked.max_total_tokens, left_tokens, day_tokens if asked.max_total_tokens else None)
    cost = _least(asked.max_cost_usd, left_cost, day_cost if asked.max_cost_usd else None)
    if (tokens is not None and tokens <= 0) or (cost is not None and cost <= 0):
        raise BudgetError(
            "budget_exceeded",
            "The spawning agent or subagent has no budget left to delegate.",
            budget="delegation",
            remaining={"max_total_tokens": left_tokens, "max_cost_usd": left_cost},
        )
    return tokens, (round(cost, 10) if cost is not None else None)


def _parent_left(runtime: Runtime, before: dict[str, Any]) -> tuple[int | None, float | None]:
    """What the parent subagent has left of its own budgets (None: unbounded; the agent's are)."""
    left_tokens, left_cost = before.get("max_total_tokens"), before.get("max_cost_usd")
    if int(before["depth"]) == 0 or (left_tokens is None and left_cost is None):
        return left_tokens, left_cost
    with runtime.store.read_prepared() as connection:
        spent = table.pre_call(connection, str(before["principal"]))
    if spent is not None and left_tokens is not None:
        left_tokens -= int(spent.input_tokens) + int(spent.output_tokens) + int(spent.delegated_tokens)
    if spent is not None and left_cost is not None:
        left_cost -= float(spent.cost_usd) + float(spent.delegated_cost_usd)
    return left_tokens, left_cost


def _day_room(daily: DailyBudget) -> tuple[int | None, float | None]:
    """What today's budget has left (None: no daily limit)."""
    if not daily.enabled:
        return None, None
    limits, spent = daily.limits, daily.spent()
    tokens = limits.max_total_tokens - spent.total_tokens if limits.max_total_tokens is not None else None
    cost = limits.max_cost_usd - spent.cost_usd if limits.max_cost_usd is not None else None
    return tokens, cost


def _deadline(max_seconds: int | None, parent: str | None) -> str | None:
    """The spawn's deadline: its own wall time from now, at most its parent's; refused past the parent's."""
    now = clock.now()
    if parent is not None and datetime.fromisoformat(parent) <= now:
        raise BudgetError(
            "budget_exceeded",
            "The spawning subagent's wall time is over.",
            budget="wall_time",
            deadline=parent,
        )
    own = (now + timedelta(seconds=max_seconds)).isoformat() if max_seconds is not None else None
    if own is None or parent is None:
        return own or parent
    return own if datetime.fromisoformat(own) < datetime.fromisoformat(parent) else parent
