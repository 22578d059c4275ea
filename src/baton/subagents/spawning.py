"""A spawn's steps: the checks before anything is stored, what the subagent is given (redacted, filtered,
prepared under its strategy), the one transaction storing it with its ``subagent_spawned`` receipt, and
the answer. Running its turns, and waiting on a sync one, are the runner's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from baton.boundary.toolkit import ToolRegistry
from baton.errors import SubagentError
from baton.evidence.receipts import Receipt, utc_now
from baton.models.client import ChatTurn, ModelClient, ModelReply
from baton.runtime import Runtime
from baton.store.leases import lease_until
from baton.subagents import table
from baton.subagents.context import (
    PREPARATION_SYSTEM_PROMPT,
    ContextStrategy,
    FilteredContext,
    PrivacyFilter,
    assert_no_leak,
    preparation_prompt,
    render_context,
    select_slice,
)
from baton.subagents.delegating import Asked, Delegation, Narrowed, narrow
from baton.subagents.governed import check_tools
from baton.subagents.spend import usage


@dataclass(frozen=True)
class SpawnRequest:
    """What ``mcp_spawn_subagent`` asks for."""

    task: str
    role: str = "assistant"
    mode: Literal["sync", "async"] = "sync"
    context_strategy: ContextStrategy = "minimal"
    parent_context: dict[str, Any] | None = None
    minimal_slice: list[str] | None = None
    business_rules: str | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    #: Tools the subagent may call (see :mod:`baton.subagents.governed`); None: none.
    tools: list[str] | None = None
    #: Most tool calls per turn (``subagent_tool_limit``); None: ``BATON_SUBAGENT_TOOL_LIMIT``.
    subagent_tool_limit: int | None = None
    #: Who spawns it (named in approval requests its tool calls create).
    parent_agent: str = "agent"
    #: The agent that spawns it (directly, or through a timer it set); None for the operator.
    agent: str | None = None
    #: Structural constraints the boundary enforces (docs/subagents.md, delegation): read-only tools only,
    #: a Cedar condition per adapter tool, a wall time.
    read_only: bool = False
    constraints: dict[str, str] | None = None
    max_seconds: int | None = None
    #: The delegation of the subagent that spawns (None: an agent spawns).
    parent: Delegation | None = None


@dataclass(frozen=True)
class SpawnContext:
    """The context a subagent is given (redacted), the fields the privacy filter removed, and the
    preparation call that wrote it (None: no model prepared it)."""

    text: str
    filtered_fields: list[str]
    prep: ModelReply | None = None

    @property
    def prep_tokens(self) -> int:
        """The preparation call's tokens (0 without one)."""
        return self.prep.total_tokens if self.prep else 0


@dataclass(frozen=True)
class Spawn:
    """A spawn once checked and prepared: what is stored, receipted and answered."""

    subagent_id: str
    #: The request as redacted (:func:`screened`).
    request: SpawnRequest
    context: SpawnContext
    tools: list[str] | None
    #: Most tool calls per turn; None when the subagent has no tools.
    tool_limit: int | None
    delegation: Delegation | None = None


def check_before_storing(
    runtime: Runtime, models: ModelClient, registry: ToolRegistry | None, request: SpawnRequest
) -> tuple[list[str] | None, int | None, Narrowed]:
    """Refuse a spawn that cannot go ahead before anything is stored or sent; returns its tools and their
    per-turn limit (both None without tools), and its delegation narrowed from its parent's."""
    models.config()  # provider_not_configured before anything is stored
    models.daily.check()  # budget_exceeded before anything is stored or sent
    tools = check_tools(registry, request.tools, request.parent_agent) if request.tools else None
    narrowed = narrow(runtime, registry, models.daily, asked(request, tools), request.parent)
    tool_limit = request.subagent_tool_limit or runtime.settings.baton_subagent_tool_limit
    if runtime.settings.baton_subagent_max_concurrent is not None:
        # before a preparation call spends anything (checked again in the spawn's transaction)
        with runtime.store.read_prepared() as connection:
            check_concurrency(runtime, connection, request.agent)
    return tools, tool_limit if tools else None, narrowed


def asked(request: SpawnRequest, tools: list[str] | None) -> Asked:
    """What the spawn asks for, of what its delegation bounds."""
    return Asked(
        agent=request.agent or request.parent_agent,
        tools=tools or [],
        read_only=request.read_only,
        constraints=request.constraints,
        max_total_tokens=request.max_total_tokens,
        max_cost_usd=request.max_cost_usd,
        max_seconds=request.max_seconds,
    )


def within(request: SpawnRequest, narrowed: Narrowed) -> SpawnRequest:
    """The request with the budgets its delegation allows (at most what it asked)."""
    tokens, cost = narrowed.fields["max_total_tokens"], narrowed.fields["max_cost_usd"]
    if tokens is request.max_total_tokens and cost is request.max_cost_usd:
        return request  # nothing narrowed (a copy of the request's 22 fields is not free on every spawn)
    return replace(request, max_total_tokens=tokens, max_cost_usd=cost)


def check_concurrency(runtime: Runtime, connection: table.Transaction, agent: str | None) -> None:
    """Refuse (``subagent_concurrency_exceeded``) a spawn past ``BATON_SUBAGENT_MAX_CONCURRENT`` subagents
    queued or running for the same agent."""
    limit = runtime.settings.baton_subagent_max_concurrent
    if limit is None:
        return
    active = table.count_active(connection, agent)
    if active >= limit:
        raise SubagentError(
            "subagent_concurrency_exceeded",
            f"{active} subagents are already queued or running (BATON_SUBAGENT_MAX_CONCURRENT={limit}); "
            "wait for one to finish or cancel one.",
            active=active,
            limit=limit,
        )


def screened(
    request: SpawnRequest, redact: Callable[[str], str], privacy: PrivacyFilter
) -> tuple[SpawnRequest, FilteredContext]:
    """The request with its text redacted, and its parent context through the privacy filter: nothing is
    used as given."""
    # a credential in the task never reaches the store, nor any model (the preparation call, and every
    # turn, which is sent the stored conversation)
    filtered = privacy.apply(request.parent_context)
    # a value the filter removed from the context is not given to the subagent through its task either
    scrub = filtered.remembered().scrub
    task, role = scrub(redact(request.task)), scrub(redact(request.role))
    rules = scrub(redact(request.business_rules)) if request.business_rules is not None else None
    if task is request.task and role is request.role and rules is request.business_rules:
        return request, filtered  # nothing to redact or remove: the request as it is
    return replace(request, task=task, role=role, business_rules=rules), filtered


async def prepare_context(
    models: ModelClient,
    request: SpawnRequest,
    filtered: FilteredContext,
    subagent_id: str,
    redact: Callable[[str], str],
) -> SpawnContext:
    """The filtered context under the request's strategy (``llm_generated``: written by a preparation
    call, refused if it repeats a removed value), redacted before it is stored."""
    prep: ModelReply | None = None
    if request.context_strategy == "minimal":
        prepared = render_context(select_slice(filtered.value, request.minimal_slice))
    elif request.context_strategy == "full":
        prepared = render_context(filtered.value)
    elif filtered.value:
        prep = await _prepare_with_model(models, request, filtered.value, subagent_id)
        prepared = prep.text.strip()
        assert_no_leak(prepared, filtered.removed_values)
    else:
        prepared = ""
    return SpawnContext(redact(prepared), filtered.filtered_fields, prep)


async def _prepare_with_model(
    models: ModelClient, request: SpawnRequest, filtered: dict[str, Any], subagent_id: str
) -> ModelReply:
    """The ``llm_generated`` preparation call, applying the business rules to the filtered context."""
    prompt = preparation_prompt(request.task, request.business_rules, filtered)
    return await models.complete(
        PREPARATION_SYSTEM_PROMPT,
        [ChatTurn("user", prompt)],
        purpose="context_preparation",
        subagent_id=subagent_id,
    )


def store(
    runtime: Runtime, spawn: Spawn, receipt_in: Callable[[table.Transaction], None] | None
) -> tuple[Receipt, Any]:
    """Store the subagent and its task in one transaction with its ``subagent_spawned`` receipt (and, for
    an async spawn, the spawning call's receipt, ``receipt_in``); returns the spawn receipt and the row
    as stored."""
    request, context, prep = spawn.request, spawn.context, spawn.context.prep
    now = utc_now()
    with runtime.store.write_prepared() as connection:
        # the receipt first: appending locks the chain's head, so on PostgreSQL too the count below
        # and the insert are one step for every process (a refusal rolls the receipt back)
        spawned = runtime.receipts.append_in(connection, "subagent_spawned", _spawned_payload(spawn))
        check_concurrency(runtime, connection, request.agent)
        stored = table.insert_subagent(
            connection,
            id=spawn.subagent_id,
            role=request.role,
            task=request.task,
            mode=request.mode,
            context_strategy=request.context_strategy,
            prepared_context=context.text,
            filtered_fields=context.filtered_fields,
            prep_tokens=context.prep_tokens,
            status="running",  # its task starts with this call, in this process (sync or async)
            input_tokens=prep.input_tokens if prep else 0,
            output_tokens=prep.output_tokens if prep else 0,
            cost_usd=(prep.cost_usd or 0.0) if prep else 0.0,
            unpriced_calls=1 if prep and prep.cost_usd is None else 0,
            max_total_tokens=request.max_total_tokens,
            max_cost_usd=request.max_cost_usd,
            tools=spawn.tools,
            tool_limit=spawn.tool_limit,
            owner=runtime.instance_id,
            lease_expires_at=lease_until(),
            created_at=now,
            updated_at=now,
            started_at=now,
            agent=request.agent,
            delegation=spawn.delegation.stored() if spawn.delegation else None,
        )
        if prep is not None and spawn.delegation is not None:
            table.add_delegated(connection, spawn.delegation.ancestors, prep)
        table.add_message(connection, spawn.subagent_id, 0, "user", request.task)
        if request.mode == "async" and receipt_in is not None:
            receipt_in(connection)
    return spawned, stored


def _spawned_payload(spawn: Spawn) -> dict[str, Any]:
    """What the ``subagent_spawned`` receipt records."""
    return {
        "subagent_id": spawn.subagent_id,
        "mode": spawn.request.mode,
        "context_strategy": spawn.request.context_strategy,
        "filtered_fields": spawn.context.filtered_fields,
        "prep_tokens": spawn.context.prep_tokens,
        "tools": spawn.tools,
        "subagent_tool_limit": spawn.tool_limit,
        "parent_agent": spawn.request.parent_agent,
        "agent": spawn.request.agent,
        **(_delegation_payload(spawn.delegation) if spawn.delegation else {}),
    }


def _delegation_payload(delegation: Delegation) -> dict[str, Any]:
    """The spawn receipt's delegation: the chain, and the Cedar text of each argument predicate in force."""
    return {"delegation": delegation.chain, "argument_predicates": delegation.policies}


def answer_base(spawn: Spawn, spawned: Receipt) -> dict[str, Any]:
    """What every answer of a spawn holds: the subagent as stored and its spawn receipt."""
    return {
        "subagent_id": spawn.subagent_id,
        "mode": spawn.request.mode,
        "context_strategy": spawn.request.context_strategy,
        "role": spawn.request.role,
        "prepared_context": spawn.context.text,
        "prep_tokens": spawn.context.prep_tokens,
        "filtered_fields": spawn.context.filtered_fields,
        "tools": spawn.tools,
        "subagent_tool_limit": spawn.tool_limit,
        "spawn_receipt": {"seq": spawned.seq, "sha256": spawned.sha256},
    }


def started_answer(base: dict[str, Any], prep: ModelReply | None) -> dict[str, Any]:
    """An async spawn's answer: running, with what its preparation call spent."""
    spent = {"usage": usage(prep.input_tokens, prep.output_tokens) if prep else usage(0, 0)}
    cost = {"cost_usd": (prep.cost_usd if prep else 0.0)}
    return {**base, "success": True, "status": "running", "result": None, **spent, **cost}


def sync_answer(base: dict[str, Any], state: dict[str, Any], done: bool) -> dict[str, Any]:
    """A sync spawn's answer from the subagent's ``state``: its result once the first turn is ``done``,
    else the human approval it waits on (the turn goes on)."""
    if not done:
        return {
            **base,
            "success": True,
            "status": "waiting_for_approval",
            "request_id": state["waiting_request_id"],
            "result": None,
            "usage": state["usage"],
            "cost_usd": state["cost_usd"],
        }
    outcome = {
        **base,
        "status": state["status"],
        "result": state["result"],
        "usage": state["usage"],
        "cost_usd": state["cost_usd"],
        "unpriced_calls": state["unpriced_calls"],
    }
    if state["status"] != "completed":
        return {
            **outcome,
            "success": False,
            "error": state["error"] or "The subagent did not complete.",
            "error_class": state["error_class"] or "subagent_cancelled",
        }
    return {**outcome, "success": True}
