"""Governed subagents: the tool allow-list, and one turn run by pydantic-ai over baton's own paths.

The turn is a pydantic-ai :class:`~pydantic_ai.Agent` run (its tool loop, its ``UsageLimits``), with
two baton parts plugged in:

- :class:`GovernedModel` wraps the provider's model so every request the loop makes goes through
  :meth:`~baton.models.ModelClient.governed_call`: the subagent's budget, the daily reservation, the
  ``model_call`` receipt (linked to the spawn) and the subagent's running totals.
- :class:`GovernedToolset` lists exactly the spawn's tools and sends every call through
  :meth:`~baton.toolkit.ToolRegistry.call`, the path an agent's ``tools/call`` takes: the gateway's
  allow-list, sandboxed upstream, pinned contract, drift block and approval bound to the arguments digest,
  and one receipt per call that names the subagent, the spawn and the model call that asked. What comes
  back passes the privacy filter before the model sees it; a failure reaches the model as a tool error
  (:class:`~pydantic_ai.exceptions.ToolFailed`) it can react to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton.agents import Caller
from baton.errors import SubagentError
from baton.models import ModelClient, ModelReply
from baton.pydantic_ai_imports import load_pydantic_ai
from baton.receipts import Receipt
from baton.subagents.context import PrivacyFilter
from baton.toolkit import CallContext, OnBehalf, ToolRegistry

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
    from sqlalchemy import Connection

#: Built-in tools a subagent may be given (documented in docs/subagents.md): timers and notifications.
#: Nothing that asks or decides for a person, nor spawns: a subagent acts, a person stays in charge.
SUBAGENT_BUILTINS: tuple[str, ...] = (
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
    #: Runs in the model-call receipt's transaction (the subagent's running totals).
    record_in: Callable[[Connection, ModelReply, Receipt], None]
    #: Called before each model request (the subagent's own budget).
    before_model_call: Callable[[], None]
    waiting: Callable[[str | None], None] | None = None
    model_calls: int = 0
    last_model_call: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: The turn's spend so far (every model call of its loop).
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0

    def on_behalf(self) -> OnBehalf:
        """The caller a tool call of this turn runs for."""
        return OnBehalf(
            subagent_id=self.subagent_id,
            parent_agent=self.parent_agent,
            spawn_receipt=self.spawn_receipt,
            model_call_receipt=dict(self.last_model_call),
            waiting=self.waiting,
        )


async def run_turn(
    client: ModelClient,
    registry: ToolRegistry,
    privacy: PrivacyFilter,
    names: list[str],
    limit: int,
    history: list[Any],
    links: TurnLinks,
) -> ModelReply:
    """Run one turn (the stored conversation in ``history``) as a pydantic-ai agent over ``names``.

    ``limit`` caps the turn's tool calls (``subagent_tool_limit``) and its model requests at one more.
    """
    from baton.pydantic_ai_imports import aload_pydantic_ai

    await aload_pydantic_ai()
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.usage import UsageLimits

    agent: Any = Agent(
        governed_model(client, links),
        toolsets=[governed_toolset(registry, names, privacy, links)],
        model_settings=client.request_settings(),
    )
    try:
        result = await agent.run(
            message_history=history,
            usage_limits=UsageLimits(request_limit=limit + 1, tool_calls_limit=limit),
        )
    except UsageLimitExceeded as exc:
        raise SubagentError(
            "subagent_tool_limit_reached",
            f"The subagent reached its subagent_tool_limit of {limit} tool calls: {exc}",
            subagent_tool_limit=limit,
            tool_calls=len(links.tool_calls),
        ) from None
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


def governed_model(client: ModelClient, links: TurnLinks) -> Any:
    """The provider's model wrapped so each request of the loop is budgeted and receipted."""
    load_pydantic_ai()
    from pydantic_ai.models.wrapper import WrapperModel

    class GovernedModel(WrapperModel):
        """Every request through :meth:`ModelClient.governed_call`."""

        async def request(
            self,
            messages: list[ModelMessage],
            model_settings: ModelSettings | None,
            model_request_parameters: ModelRequestParameters,
        ) -> ModelResponse:
            links.before_model_call()
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

            def record(connection: Connection, reply: ModelReply, written: Receipt) -> None:
                links.last_model_call = {"seq": written.seq, "sha256": written.sha256}
                links.input_tokens += reply.input_tokens
                links.output_tokens += reply.output_tokens
                links.cost_usd += reply.cost_usd or 0.0
                links.latency_seconds += float(reply.receipt["latency_seconds"])
                links.record_in(connection, reply, written)

            response, _reply = await client.governed_call(
                send,
                prompt_chars=chars,
                purpose="subagent_turn",
                subagent_id=links.subagent_id,
                links={"spawn_receipt": links.spawn_receipt, "model_call_index": links.model_calls},
                record_in=record,
            )
            return response

    return GovernedModel(client.model())


def governed_toolset(
    registry: ToolRegistry, names: list[str], privacy: PrivacyFilter, links: TurnLinks
) -> Any:
    """A pydantic-ai toolset of exactly ``names``, each call through the registry's one path."""
    load_pydantic_ai()
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema

    any_arguments = SchemaValidator(
        core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
    )

    class GovernedToolset(AbstractToolset[None]):
        """The spawn's tools; arguments are checked by the tool itself (the registry or the upstream)."""

        _definitions: list[ToolDefinition] | None = None

        @property
        def id(self) -> str | None:
            return "baton-governed"

        async def get_tools(self, ctx: RunContext[None]) -> dict[str, ToolsetTool[None]]:
            if self._definitions is None:
                self._definitions = await tool_definitions(registry, names)
            return {
                d.name: ToolsetTool(toolset=self, tool_def=d, max_retries=2, args_validator=any_arguments)
                for d in self._definitions
            }

        async def call_tool(
            self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
        ) -> Any:
            behalf = links.on_behalf()
            # the call runs as the spawning agent: what it may see, and whose its requests are
            caller = Caller(behalf.parent_agent)
            result = await registry.call(name, tool_args, CallContext(on_behalf=behalf, agent=caller))
            links.tool_calls.append(
                {
                    "tool": name,
                    "success": bool(result.get("success")),
                    "error_class": result.get("error_class"),
                    "model_call_receipt": behalf.model_call_receipt,
                }
            )
            shown = privacy.filter_result(shown_result(name, result))
            if not result.get("success"):
                raise ToolFailed(json.dumps(shown, ensure_ascii=False, sort_keys=True))
            return shown

    return GovernedToolset()


def shown_result(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """What of a tool's result the model is shown (before the privacy filter)."""
    if ("__" in name and "adapter_id" in result) or result.get("error_class"):
        return {key: result[key] for key in SHOWN_GATEWAY_FIELDS if key in result}
    return dict(result)


async def tool_definitions(registry: ToolRegistry, names: list[str]) -> list[Any]:
    """pydantic-ai tool definitions of ``names``: built-ins from their argument models, adapter tools
    with the upstream's pinned schema (as an agent's ``tools/list`` shows them)."""
    from baton.pydantic_ai_imports import aload_pydantic_ai

    await aload_pydantic_ai()
    from pydantic_ai.tools import ToolDefinition

    proxied: dict[str, dict[str, Any]] = {}
    proxy = registry.runtime.services.get("gateway_proxy")
    if proxy is not None and any("__" in name for name in names):
        proxied = {tool["name"]: tool for tool in await proxy.list_tools()}
    definitions = []
    for name in names:
        spec = registry.tools.get(name)
        if spec is not None:
            schema, description = spec.input_schema(), spec.description
        elif name in proxied:
            schema = proxied[name].get("inputSchema") or {"type": "object", "properties": {}}
            description = proxied[name].get("description") or ""
        else:
            continue  # demoted since the spawn: the model is not offered it (a call would be refused)
        definitions.append(ToolDefinition(name=name, parameters_json_schema=schema, description=description))
    return definitions
