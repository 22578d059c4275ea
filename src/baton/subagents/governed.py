"""Governed subagents: the tool allow-list, and one turn run by pydantic-ai over baton's own paths.

The turn is a pydantic-ai :class:`~pydantic_ai.Agent` run (its tool loop, its ``UsageLimits``), with
two baton parts plugged in:

- :class:`GovernedModel` wraps the provider's model so every request the loop makes goes through
  :meth:`~baton.models.client.ModelClient.governed_call`: the subagent's budget, the daily reservation, the
  ``model_call`` receipt (linked to the spawn) and the subagent's running totals.
- :class:`GovernedToolset` lists exactly the spawn's tools and sends every call through
  :meth:`~baton.boundary.toolkit.ToolRegistry.call`, the path an agent's ``tools/call`` takes: the gateway's
  allow-list, sandboxed upstream, pinned contract, drift block and approval bound to the arguments digest,
  and one receipt per call that names the subagent, the spawn and the model call that asked. What comes
  back passes the privacy filter before the model sees it; a failure reaches the model as a tool error
  (:class:`~pydantic_ai.exceptions.ToolFailed`) it can react to.

Both, and the agent over them, are built once per process (:class:`GovernedLoop`, which the runner
holds); what belongs to one turn (its links, its tool list) is the run's ``deps``, and the model wrapper
reads the turn it serves from :data:`CURRENT_TURN`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

from baton.boundary.toolkit import CallContext, OnBehalf, ToolRegistry
from baton.errors import SubagentError
from baton.evidence.receipts import Receipt
from baton.identity.agents import Caller
from baton.models.client import ModelClient, ModelReply
from baton.models.pydantic_ai_imports import aload_pydantic_ai, load_pydantic_ai
from baton.store.recent import RecentMap
from baton.subagents.context import PrivacyFilter
from baton.subagents.remembered import Remembered, scrub_requests

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
    from sqlalchemy import Connection

    from baton.store.engine import DriverTransaction

#: Built-in tools a subagent may be given (documented in docs/subagents.md): timers, notifications and
#: spawning (a narrower delegation, up to BATON_SUBAGENT_MAX_DEPTH). Nothing that asks or decides for a
#: person: a subagent acts, a person stays in charge.
SUBAGENT_BUILTINS: tuple[str, ...] = (
    "mcp_spawn_subagent",
    "mcp_set_timer",
    "mcp_list_timers",
    "mcp_cancel_timer",
    "mcp_send_email",
    "mcp_send_telegram_message",
    "mcp_send_slack_message",
    "mcp_send_discord_message",
    "mcp_send_webhook",
    "mcp_notification_channels",
)

#: Fields of a gateway result the model is shown (``mcp_content`` repeats ``text``).
SHOWN_GATEWAY_FIELDS = ("success", "text", "structured_content", "error", "error_class", "approval")


def permitted_tools_for(registry: ToolRegistry, agent: str | None = None) -> set[str]:
    """Every tool a subagent spawned by ``agent`` may be given: the documented built-ins this server
    serves and each live, unblocked adapter's allowed tools (``{adapter_id}__{tool}``).

    Today every client of a server may use all of them; when agents have names, their own permissions
    narrow this set here, and nowhere else.
    """
    names = {name for name in SUBAGENT_BUILTINS if name in registry.tools}
    proxy = registry.runtime.services.get("gateway_proxy")
    if proxy is not None:
        for adapter in list(proxy.adapters.values()):
            current, live = proxy.current(adapter)
            if live and current.block is None:
                names.update(f"{current.id}__{tool}" for tool in current.definitions)
    return names


def check_tools(registry: ToolRegistry | None, requested: list[str], agent: str | None) -> list[str]:
    """The requested names, deduplicated in order; ``subagent_tool_not_allowed`` names any not permitted."""
    wanted = list(dict.fromkeys(requested))
    permitted = permitted_tools_for(registry, agent) if registry is not None else set()
    refused = [name for name in wanted if name not in permitted]
    if refused:
        raise SubagentError(
            "subagent_tool_not_allowed",
            f"A subagent cannot be given {', '.join(refused)}: each tool must be a promoted adapter's "
            "allowed tool ({adapter_id}__{tool}) or a documented subagent built-in that the spawning "
            "agent may use.",
            refused=refused,
            permitted=sorted(permitted),
        )
    return wanted


@dataclass
class TurnLinks:
    """What one turn's receipts link to, and what it reports as it runs."""

    subagent_id: str
    parent_agent: str
    spawn_receipt: dict[str, Any]
    #: Runs in the model-call receipt's transaction (the subagent's running totals), with statements of
    #: :mod:`baton.store.prepared` only.
    record_in: Callable[[Connection | DriverTransaction, ModelReply, Receipt], None]
    #: Called before each model request (the subagent's own budget).
    before_model_call: Callable[[], None]
    waiting: Callable[[str | None], None] | None = None
    #: The subagent's delegation chain and its predicates' Cedar texts (``subagents.delegation``).
    delegation: list[dict[str, Any]] = field(default_factory=list)
    policies: dict[str, str] = field(default_factory=dict)
    model_calls: int = 0
    last_model_call: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: The turn's spend so far (every model call of its loop).
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0
    #: The values the privacy filter removed for the spawn so far (removed again from every tool result).
    remembered: Remembered = field(default_factory=Remembered)

    def on_behalf(self) -> OnBehalf:
        """The caller a tool call of this turn runs for."""
        return OnBehalf(
            subagent_id=self.subagent_id,
            parent_agent=self.parent_agent,
            spawn_receipt=self.spawn_receipt,
            model_call_receipt=dict(self.last_model_call),
            waiting=self.waiting,
            delegation=self.delegation,
            policies=self.policies,
        )


#: The turn whose model requests the process's one governed model is making now (set by
#: :meth:`GovernedLoop.run_turn`; the tasks pydantic-ai starts for the run copy it).
CURRENT_TURN: ContextVar[TurnLinks] = ContextVar("baton_governed_turn")

#: How many tool lists (one per set of tools and served adapter versions) a process keeps built.
DEFINITIONS_KEPT = 64


@dataclass(frozen=True)
class Turn:
    """What one pydantic-ai run of a turn needs (its ``deps``): its links and the tools it offers."""

    links: TurnLinks
    definitions: list[Any]


class GovernedLoop:
    """The process's one pydantic-ai agent over the governed model and toolset, and the tool lists it
    offers: built once and reused by every turn of every subagent (what is per turn travels as ``deps``).

    A turn's tool list is rebuilt only when what it lists changed: each turn reads the liveness of the
    adapters it names (one store read each), so a demotion hides the adapter's tools from the next turn,
    and a re-promotion offers the new version's pinned schemas. Every call still goes through the
    gateway, which checks liveness per call: a demotion stops the next call even inside a turn.
    """

    def __init__(self, client: ModelClient, registry: ToolRegistry, privacy: PrivacyFilter) -> None:
        self.client = client
        self.registry = registry
        self.privacy = privacy
        self._agent: Any = None
        self._agent_model: Any = None
        self._definitions: RecentMap[tuple[Any, ...], list[Any]] = RecentMap(DEFINITIONS_KEPT)

    def agent(self) -> Any:
        """The pydantic-ai agent, built on first use (and again if the model client was rebuilt)."""
        load_pydantic_ai()
        from pydantic_ai import Agent

        model = self.client.model()
        if self._agent is None or self._agent_model is not model:
            self._agent = Agent(
                governed_model_class()(model, self.client),
                deps_type=Turn,
                toolsets=[governed_toolset_class()(self.registry, self.privacy)],
                model_settings=self.client.request_settings(),
            )
            self._agent_model = model
        return self._agent

    async def run_turn(
        self, names: list[str], limit: int, history: list[Any], links: TurnLinks
    ) -> ModelReply:
        """Run one turn (the stored conversation in ``history``) as a pydantic-ai agent over ``names``.

        ``limit`` caps the turn's tool calls (``subagent_tool_limit``) and its model requests at one more.
        """
        await aload_pydantic_ai()
        await self.client.amodel()  # a first build off the event loop (agent() then finds it built)
        from pydantic_ai.exceptions import UsageLimitExceeded
        from pydantic_ai.usage import UsageLimits

        turn = Turn(links, self.definitions(names))
        token = CURRENT_TURN.set(links)
        try:
            result = await self.agent().run(
                message_history=history,
                deps=turn,
                usage_limits=UsageLimits(request_limit=limit + 1, tool_calls_limit=limit),
            )
        except UsageLimitExceeded as exc:
            raise SubagentError(
                "subagent_tool_limit_reached",
                f"The subagent reached its subagent_tool_limit of {limit} tool calls: {exc}",
                subagent_tool_limit=limit,
                tool_calls=len(links.tool_calls),
            ) from None
        finally:
            CURRENT_TURN.reset(token)
        return ModelReply(
            text=str(result.output),
            input_tokens=links.input_tokens,
            output_tokens=links.output_tokens,
            receipt={
                "latency_seconds": round(links.latency_seconds, 6),
                "cost_usd": links.cost_usd,
                "tool_calls": links.tool_calls,
            },
        )

    def definitions(self, names: list[str]) -> list[Any]:
        """pydantic-ai tool definitions of ``names``: built-ins from their argument models, adapter tools
        with the served version's pinned schema (as an agent's ``tools/list`` shows them); an adapter
        demoted since the spawn is not offered (a call would be refused)."""
        served = self._served_adapters(names)
        key = (tuple(names), tuple((a.id, a.row.get("serving_policy_checksum")) for a in served.values()))
        built = self._definitions.get(key)
        if built is None:
            built = self._definitions[key] = tool_definitions(self.registry, names, served)
        else:
            self._definitions.move_to_end(key)
        return built

    def _served_adapters(self, names: list[str]) -> dict[str, Any]:
        """The live version of each adapter ``names`` name (one liveness read each), by adapter id."""
        proxy = self.registry.runtime.services.get("gateway_proxy")
        if proxy is None:
            return {}
        named = {n.partition("__")[0] for n in names if "__" in n and n not in self.registry.tools}
        served = {}
        for adapter_id in sorted(named):
            adapter = proxy.adapters.get(adapter_id)
            if adapter is None:
                continue
            current, live = proxy.current(adapter)
            if live:
                served[adapter_id] = current
        return served


def tool_definitions(registry: ToolRegistry, names: list[str], served: dict[str, Any]) -> list[Any]:
    """The definitions of ``names`` that are offered: built-ins, and tools of the ``served`` adapters."""
    load_pydantic_ai()
    from pydantic_ai.tools import ToolDefinition

    definitions = []
    for name in names:
        spec = registry.tools.get(name)
        adapter_id, _, tool = name.partition("__")
        if spec is not None:
            schema, description = spec.input_schema(), spec.description
        elif adapter_id in served and tool in served[adapter_id].definitions:
            pinned = served[adapter_id].definitions[tool]
            schema = pinned.get("inputSchema") or {"type": "object", "properties": {}}
            description = pinned.get("description") or ""
        else:
            continue  # demoted since the spawn: the model is not offered it (a call would be refused)
        definitions.append(ToolDefinition(name=name, parameters_json_schema=schema, description=description))
    return definitions


@cache
def governed_model_class() -> type[Any]:
    """The model wrapper class (defined once pydantic-ai is imported)."""
    load_pydantic_ai()
    from pydantic_ai.models.wrapper import WrapperModel

    class GovernedModel(WrapperModel):
        """The provider's model, each request of the current turn through :meth:`ModelClient.governed_call`:
        budgeted and receipted, linked to the turn's spawn."""

        def __init__(self, wrapped: Any, client: ModelClient) -> None:
            super().__init__(wrapped)
            self.client = client

        async def request(
            self,
            messages: list[ModelMessage],
            model_settings: ModelSettings | None,
            model_request_parameters: ModelRequestParameters,
        ) -> ModelResponse:
            links = CURRENT_TURN.get()
            client = self.client
            links.before_model_call()
            scrub_requests(messages, links.remembered)
            client.log_model_messages(messages, "subagent_turn", links.subagent_id)
            tools = [tool.parameters_json_schema for tool in model_request_parameters.function_tools]
            chars = sum(len(str(getattr(p, "content", ""))) for m in messages for p in m.parts)
            chars += len(json.dumps(tools))
            links.model_calls += 1

            async def send(model: Any) -> ModelResponse:
                response: ModelResponse = await model.request(
                    messages, model_settings, model_request_parameters
                )
                return response

            def record(
                connection: Connection | DriverTransaction, reply: ModelReply, written: Receipt
            ) -> None:
                links.last_model_call = {"seq": written.seq, "sha256": written.sha256}
                links.input_tokens += reply.input_tokens
                links.output_tokens += reply.output_tokens
                links.cost_usd += reply.cost_usd or 0.0
                links.latency_seconds += float(reply.receipt["latency_seconds"])
                links.record_in(connection, reply, written)

            response, reply = await client.governed_call(
                send,
                prompt_chars=chars,
                purpose="subagent_turn",
                subagent_id=links.subagent_id,
                links={
                    "spawn_receipt": links.spawn_receipt,
                    "model_call_index": links.model_calls,
                    **({"delegation": links.delegation} if links.delegation else {}),
                },
                record_in=record,
            )
            if reply.cost_usd is not None and response.usage.cost is None:
                # baton's price, the receipt's: pydantic-ai would search the same price table again
                response.usage.cost = Decimal(str(reply.cost_usd))
            return response

    return GovernedModel


@cache
def governed_toolset_class() -> type[Any]:
    """The toolset class (defined once pydantic-ai is imported)."""
    load_pydantic_ai()
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema

    any_arguments = SchemaValidator(
        core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
    )

    class GovernedToolset(AbstractToolset[Turn]):
        """Exactly the turn's tools, each call through the registry's one path; arguments are checked by
        the tool itself (the registry or the upstream)."""

        def __init__(self, registry: ToolRegistry, privacy: PrivacyFilter) -> None:
            self.registry = registry
            self.privacy = privacy

        @property
        def id(self) -> str | None:
            return "baton-governed"

        async def get_tools(self, ctx: RunContext[Turn]) -> dict[str, ToolsetTool[Turn]]:
            return {
                d.name: ToolsetTool(toolset=self, tool_def=d, max_retries=2, args_validator=any_arguments)
                for d in ctx.deps.definitions
            }

        async def call_tool(
            self, name: str, tool_args: dict[str, Any], ctx: RunContext[Turn], tool: ToolsetTool[Turn]
        ) -> Any:
            links = ctx.deps.links
            behalf = links.on_behalf()
            # the call runs as the spawning agent: what it may see, and whose its requests are
            caller = Caller(behalf.parent_agent)
            result = await self.registry.call(name, tool_args, CallContext(on_behalf=behalf, agent=caller))
            links.tool_calls.append(
                {
                    "tool": name,
                    "success": bool(result.get("success")),
                    "error_class": result.get("error_class"),
                    "model_call_receipt": behalf.model_call_receipt,
                }
            )
            shown = self.privacy.filter_result(shown_result(name, result), links.remembered)
            if not result.get("success"):
                raise ToolFailed(json.dumps(shown, ensure_ascii=False, sort_keys=True))
            return shown

    return GovernedToolset


def shown_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """What of a tool's result the model is shown (before the privacy filter)."""
    if ("__" in name and "adapter_id" in result) or result.get("error_class"):
        return {key: result[key] for key in SHOWN_GATEWAY_FIELDS if key in result}
    return dict(result)
