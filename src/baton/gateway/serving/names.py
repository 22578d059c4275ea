"""The names the proxy serves adapters' tools under, and the collisions that refuse an unprefixed adapter.

An adapter's allowed tools are served as ``{adapter_id}__{tool}``, or, when its policy says
``[serving] unprefixed = true``, under the tool's own name: then no built-in tool and no other live
adapter may serve that name too. Promotion refuses such a collision; a server that finds one anyway (two
promotions racing, a built-in tool added since) serves neither colliding name and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from baton.errors import GatewayError
from baton.gateway.policy.policy import Policy

if TYPE_CHECKING:
    from baton.boundary.toolkit import DynamicTools, ToolRegistry
    from baton.runtime import Runtime

SEPARATOR = "__"

#: Who else serves a name (``"the built-in tool mcp_ping"``), or None when nothing else does.
Taken = Callable[[str], str | None]


class Served(Protocol):
    """A live adapter as the routes see it: its id and its policy."""

    @property
    def id(self) -> str:
        """The adapter id."""
        ...

    @property
    def policy(self) -> Policy:
        """The policy it is served under."""
        ...


def served_name(policy: Policy, tool: str) -> str:
    """The name the proxy serves ``tool`` of ``policy``'s adapter under."""
    return tool if policy.serving.unprefixed else f"{policy.id}{SEPARATOR}{tool}"


def builtin_names() -> frozenset[str]:
    """Every built-in tool's name: no adapter may serve one."""
    from baton.results.definitions import TOOL_META

    return frozenset(TOOL_META)


def builtin_taken(name: str) -> str | None:
    """``Taken`` for the built-in tools alone (what a promotion outside the server can know)."""
    return f"the built-in tool {name}" if name in builtin_names() else None


def taken_in(registry: ToolRegistry | None, source: DynamicTools) -> Taken:
    """``Taken`` for a running server: its built-in tools, and every tool source's but ``source``'s."""

    def taken(name: str) -> str | None:
        if registry is not None and name in registry.tools:
            return f"the built-in tool {name}"
        if registry is not None and any(s is not source and s.owns(name) for s in registry.dynamic):
            return f"the tool {name} of another tool source"
        return builtin_taken(name)

    return taken


def clashes(policy: Policy, taken: Taken, others: Iterable[Policy]) -> list[tuple[str, str]]:
    """Each name ``policy``'s adapter would serve that something else serves too, with what that is."""
    others = [other for other in others if other.id != policy.id]
    found = []
    for tool in policy.tools.allowed:
        name = served_name(policy, tool)
        owner = taken(name)
        for other in others:
            if owner is None and name in {served_name(other, t) for t in other.tools.allowed}:
                owner = f"adapter {other.id}'s tool {name}"
        if owner is not None:
            found.append((name, owner))
    return found


def collision_error(adapter_id: str, found: list[tuple[str, str]]) -> GatewayError:
    """``adapter_tool_name_collision``, naming each colliding name and what else serves it."""
    listed = "; ".join(f"{name} (also {owner})" for name, owner in found)
    return GatewayError(
        "adapter_tool_name_collision",
        f"Adapter {adapter_id} cannot serve these tools under their own names: {listed}. Deny the "
        "colliding tools, or serve the adapter prefixed ([serving] unprefixed = false).",
        adapter_id=adapter_id,
        collisions=[{"name": name, "with": owner} for name, owner in found],
    )


def block_view(block: GatewayError | None) -> dict[str, Any]:
    """``mcp_list_adapters``' block fields: a run-time block, or a collision that keeps it from serving."""
    return {
        "blocked": block is not None,
        "block_error_class": block.error_class if block else None,
        "block_reason": block.message if block else None,
    }


def check_promotable(runtime: Runtime, policy: Policy) -> None:
    """Refuse to promote ``policy`` when a name it would serve is a built-in's or another live adapter's."""
    from baton.gateway.policy.snapshot import live_adapters

    found = clashes(policy, builtin_taken, [live.policy for live in live_adapters(runtime)])
    if found:
        raise collision_error(policy.id, found)


class Routes:
    """Which live adapter and tool each served name reaches, built once per set of live adapters."""

    def __init__(self, adapters: Iterable[Served], taken: Taken) -> None:
        adapters = list(adapters)
        policies = [adapter.policy for adapter in adapters]
        self.refused: dict[str, GatewayError] = {}
        #: Unprefixed allowed names, and unprefixed denied ones (so a call to one is ``tool_denied``).
        self.allowed: dict[str, tuple[Served, str]] = {}
        self.denied: dict[str, tuple[Served, str]] = {}
        for adapter in adapters:
            found = clashes(adapter.policy, taken, policies)
            if found and adapter.policy.serving.unprefixed:
                self.refused[adapter.id] = collision_error(adapter.id, found)
            elif adapter.policy.serving.unprefixed:
                tools = adapter.policy.tools
                self.allowed.update((tool, (adapter, tool)) for tool in tools.allowed)
                self.denied.update((tool, (adapter, tool)) for tool in tools.denied if taken(tool) is None)
