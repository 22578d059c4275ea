"""A subagent's turn: the stored conversation sent to the model (one plain call, or a governed run over the
spawn's tools), the answer recorded, and the failed or cancelled end of a turn that did not answer. The task
running it, the sync waits and stopping it on a cancel are the runner's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update

from baton.errors import BatonError, SubagentError
from baton.evidence.receipts import utc_now
from baton.models.client import ChatTurn, ModelClient, ModelReply, to_model_messages
from baton.models.pydantic_ai_imports import aload_pydantic_ai
from baton.runtime import Runtime
from baton.store.schema import receipts, subagents
from baton.subagents import cancellation, queries, table
from baton.subagents.context import subagent_system_prompt
from baton.subagents.delegating import Delegation
from baton.subagents.governed import GovernedLoop, TurnLinks
from baton.subagents.remembered import Remembered
from baton.subagents.spend import check_subagent_budget
from baton.subagents.states import ACTIVE, Status

log = logging.getLogger("baton.subagents")

#: A governed turn as the runner runs it, from the stored row, its conversation and the system prompt.
GovernedTurn = Callable[[Any, list[ChatTurn], str], Awaitable[ModelReply]]


def first_turn(
    runtime: Runtime, subagent_id: str, stored: Any, task: str
) -> tuple[Any, list[ChatTurn]] | None:
    """A spawned subagent's row and conversation for its first turn, as its spawn ``stored`` them (its row,
    its ``task``: nothing else changes them while it runs); None when it is no longer active (cancelled
    before its task ran), which only its status, read now, can say."""
    with runtime.store.read_prepared() as connection:
        status = table.status(connection, subagent_id)
    return (stored, [ChatTurn("user", task)]) if status is not None and status in ACTIVE else None


async def run(
    runtime: Runtime,
    models: ModelClient,
    subagent_id: str,
    loaded: tuple[Any, list[ChatTurn]] | None,
    governed_turn: GovernedTurn,
    cancelling: Container[str],
) -> ModelReply | None:
    """Send the stored conversation (``loaded``, else read now) to the model and record the answer;
    never raises, but for a cancel (re-raised once the subagent is ended cancelled).

    ``cancelling``: the subagents whose cancel receipt their runner appends once their task has stopped.
    """
    row, conversation = loaded or queries.load(runtime, subagent_id)
    system = subagent_system_prompt(row.role, row.prepared_context)
    held = Delegation.from_stored(getattr(row, "delegation", None))
    answer = _TurnAnswer(runtime, subagent_id, len(conversation), held.ancestors if held else [])
    try:
        reply = await _ask(models, row, conversation, system, answer, governed_turn)
    except asyncio.CancelledError:
        _end_unanswered(
            runtime,
            subagent_id,
            "cancelled",
            error="The subagent was cancelled.",
            error_class="subagent_cancelled",
        )
        raise
    except BatonError as exc:
        _end_unanswered(runtime, subagent_id, "failed", error=exc.message, error_class=exc.error_class)
        return None
    except Exception:
        log.exception("subagent turn failed")
        _end_unanswered(
            runtime,
            subagent_id,
            "failed",
            error="The subagent failed unexpectedly.",
            error_class="internal_error",
        )
        return None
    return _answered(runtime, subagent_id, reply, answer, cancelling)


@dataclass
class _TurnAnswer:
    """A turn's answer as recorded: with the model call's receipt (a plain turn), else after the call."""

    runtime: Runtime
    subagent_id: str
    #: The answer's position in the conversation.
    position: int
    #: The subagents above it, whose budgets its spend counts in.
    ancestors: list[str] = field(default_factory=list)
    #: Whether each recording changed the subagent (the first counts; empty: not recorded yet).
    recorded: list[bool] = field(default_factory=list)

    def record_in(self, connection: table.Transaction, reply: ModelReply, counted: bool) -> None:
        """Complete the subagent with ``reply`` (adding its spend unless already ``counted``) and store it."""
        text = self.runtime.redactor.text(reply.text)  # an echoed credential is stored redacted
        spend = None if counted else reply
        if spend is not None:
            table.add_delegated(connection, self.ancestors, spend)
        if table.complete(connection, self.subagent_id, text, utc_now(), spend):
            # every end of a subagent has its receipt (what a subagent.finished event is read from)
            self.runtime.receipts.append_in(
                connection, "subagent_completed", {"subagent_id": self.subagent_id}
            )
            latency = reply.receipt["latency_seconds"]
            table.add_message(connection, self.subagent_id, self.position, "assistant", text, latency)
            self.recorded.append(True)
        else:
            # ended meanwhile (a cancel): the answer is dropped, but the receipted call counts
            if spend is not None:
                table.add_spend(connection, self.subagent_id, spend)
            self.recorded.append(False)


async def _ask(
    models: ModelClient,
    row: Any,
    conversation: list[ChatTurn],
    system: str,
    answer: _TurnAnswer,
    governed_turn: GovernedTurn,
) -> ModelReply:
    """The turn's model work: a governed run over the spawn's tools, or one plain call."""
    if row.tools:
        # a governed turn adds each model call to the totals as it is receipted
        return await governed_turn(row, conversation, system)
    check_subagent_budget(row)
    # the answer commits with the call's receipt: one transaction, and no receipted answer can be lost
    # between the two
    return await models.complete(
        system,
        conversation,
        purpose="subagent_turn",
        subagent_id=answer.subagent_id,
        answer_in=lambda connection, reply: answer.record_in(connection, reply, False),
    )


def _answered(
    runtime: Runtime, subagent_id: str, reply: ModelReply, answer: _TurnAnswer, cancelling: Container[str]
) -> ModelReply | None:
    """Record the answer unless the model call's transaction did; the reply, or None when the subagent
    had ended meanwhile (whose cancel by another process this one then receipts)."""
    if not answer.recorded:
        with runtime.store.write_prepared() as connection:
            answer.record_in(connection, reply, True)
    changed = answer.recorded[0]
    if not changed and subagent_id not in cancelling:
        cancellation.receipt_if_cancelled_elsewhere(runtime, subagent_id)
    return reply if changed else None


def _end_unanswered(
    runtime: Runtime, subagent_id: str, status: Status, *, error: str, error_class: str
) -> None:
    """End a turn that did not answer: the subagent ``status`` with its redacted error, and the
    ``subagent_{status}`` receipt in the same transaction (nothing when it had already ended)."""
    now = utc_now()
    with runtime.store.write() as connection:
        error = runtime.redactor.text(error)
        if table.end(connection, subagent_id, status, error=error, error_class=error_class, now=now):
            runtime.receipts.append_in(
                connection, f"subagent_{status}", {"subagent_id": subagent_id, "error_class": error_class}
            )


# the governed turn --------------------------------------------------------------------------------------


def governed_links(
    runtime: Runtime,
    subagent_id: str,
    *,
    parent_agent: str,
    spawn_receipt: dict[str, Any],
    waiting: Callable[[str | None], None],
    delegation: Any = None,
    remembered: Remembered,
) -> TurnLinks:
    """What a governed turn's receipts link to (its delegation chain among them); each model call is
    checked against the stored subagent before it is made and added to its totals in its receipt's
    transaction."""
    held = Delegation.from_stored(delegation)

    def record_in(connection: table.Transaction, reply: ModelReply, _written: Any) -> None:
        table.add_spend(connection, subagent_id, reply)
        table.add_delegated(connection, held.ancestors if held else [], reply)

    return TurnLinks(
        subagent_id=subagent_id,
        parent_agent=parent_agent,
        spawn_receipt=spawn_receipt,
        record_in=record_in,
        before_model_call=lambda: _check_before_model_call(runtime, subagent_id),
        waiting=waiting,
        delegation=held.chain if held else [],
        policies=held.policies if held else {},
        remembered=remembered,
    )


def _check_before_model_call(runtime: Runtime, subagent_id: str) -> None:
    """Refuse a governed turn's next model call once the subagent is gone, no longer active, or over its
    own budget."""
    with runtime.store.read_prepared() as connection:
        current = table.pre_call(connection, subagent_id)
    if current is None:
        raise queries.not_found(subagent_id)
    if current.status not in ACTIVE:
        raise SubagentError("subagent_cancelled", "The subagent was cancelled.")
    check_subagent_budget(current)


async def run_governed(
    runtime: Runtime,
    loop: GovernedLoop,
    row: Any,
    conversation: list[ChatTurn],
    system: str,
    links: TurnLinks,
) -> ModelReply:
    """One turn as a pydantic-ai agent run over the spawn's tools (see :mod:`baton.subagents.governed`)."""
    limit = int(row.tool_limit or runtime.settings.baton_subagent_tool_limit)
    await aload_pydantic_ai()  # before any pydantic-ai import here: the warm-up may be importing it
    history = to_model_messages(system, conversation)
    return await loop.run_turn(list(row.tools), limit, history, links)


def spawn_receipt(runtime: Runtime, kept: dict[str, dict[str, Any]], subagent_id: str) -> dict[str, Any]:
    """seq and sha256 of the subagent's ``subagent_spawned`` receipt: from ``kept`` (filled at spawn), else
    looked up in the chain (a subagent another process spawned) and kept."""
    known = kept.get(subagent_id)
    if known is not None:
        return dict(known)
    needle = f'%"subagent_id":"{subagent_id}"%'
    query = select(receipts.c.seq, receipts.c.sha256).where(
        receipts.c.kind == "subagent_spawned", receipts.c.payload.like(needle)
    )
    with runtime.store.read() as connection:
        row = connection.execute(query.limit(1)).first()
    if row is None:
        return {"seq": None, "sha256": None}
    found = kept[subagent_id] = {"seq": row.seq, "sha256": row.sha256}
    return dict(found)


def record_waiting(runtime: Runtime, subagent_id: str, request_id: str | None) -> None:
    """Store the human request a tool call of the subagent waits on (None: no longer waiting)."""
    with runtime.store.write() as connection:
        connection.execute(
            update(subagents).where(subagents.c.id == subagent_id).values(waiting_request_id=request_id)
        )
