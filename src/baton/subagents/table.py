"""A subagent's rows on its hot path (spawn, start, load, answer): each statement built once.

The runner calls these inside its own transactions; each is a :class:`~baton.store.prepared.Prepared`
statement, so a fan-out of hundreds of subagents does not build, and have SQLAlchemy compile-key,
the same few statements hundreds of times.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, or_, select, update

from baton.evidence.canonical import utc_now
from baton.models.client import ChatTurn, ModelReply
from baton.store.engine import DriverTransaction
from baton.store.prepared import Prepared
from baton.store.schema import subagent_messages, subagents

Transaction = Connection | DriverTransaction

_row = subagents.c
#: ``status IN ('queued', 'running')`` written as ORs: an IN list would be expanded per execution.
_ACTIVE = or_(_row.status == "queued", _row.status == "running")

#: The columns a spawn writes (the rest start NULL).
SPAWN_COLUMNS = (
    "id",
    "role",
    "task",
    "mode",
    "context_strategy",
    "prepared_context",
    "filtered_fields",
    "prep_tokens",
    "status",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "unpriced_calls",
    "max_total_tokens",
    "max_cost_usd",
    "tools",
    "tool_limit",
    "owner",
    "lease_expires_at",
    "created_at",
    "updated_at",
    "started_at",
    "agent",
    "delegation",
    "delegated_tokens",
    "delegated_cost_usd",
)

#: Parameter names differ from column names (SQLAlchemy reserves those in an INSERT or UPDATE).
_INSERT = Prepared(insert(subagents).values({name: bindparam(f"new_{name}") for name in SPAWN_COLUMNS}))
_INSERT_MESSAGE = Prepared(
    insert(subagent_messages).values(
        {
            name: bindparam(f"new_{name}")
            for name in ("subagent_id", "position", "role", "content", "at", "latency_seconds")
        }
    )
)
_COUNT_ACTIVE = Prepared(select(func.count()).where(_ACTIVE, _row.agent == bindparam("agent")))
_COUNT_ACTIVE_NO_AGENT = Prepared(select(func.count()).where(_ACTIVE, _row.agent.is_(None)))
_SELECT = Prepared(select(subagents).where(_row.id == bindparam("subagent_id")))
#: What is read before each model call of a governed turn: the subagent's status and its own budget.
_PRE_CALL = Prepared(
    select(
        _row.status,
        _row.input_tokens,
        _row.output_tokens,
        _row.cost_usd,
        _row.max_total_tokens,
        _row.max_cost_usd,
        _row.delegation,
        _row.delegated_tokens,
        _row.delegated_cost_usd,
    ).where(_row.id == bindparam("subagent_id"))
)
_MESSAGES = Prepared(
    select(subagent_messages.c.role, subagent_messages.c.content)
    .where(subagent_messages.c.subagent_id == bindparam("subagent_id"))
    .order_by(subagent_messages.c.position)
)
_ANSWER: dict[str, Any] = {
    "status": "completed",
    "result": bindparam("answer"),
    "updated_at": bindparam("now"),
    "finished_at": bindparam("now"),
    "waiting_request_id": None,
}
_ANSWERED_WHERE = (_row.id == bindparam("subagent_id"), _row.status == "running")
#: The answer of a turn whose model calls were already added to the totals (a governed turn).
_COMPLETE = Prepared(update(subagents).where(*_ANSWERED_WHERE).values(_ANSWER))
#: The answer of a turn of one model call, added to the totals with it.
_COMPLETE_COUNTING = Prepared(
    update(subagents)
    .where(*_ANSWERED_WHERE)
    .values(
        {
            **_ANSWER,
            "input_tokens": _row.input_tokens + bindparam("add_input_tokens"),
            "output_tokens": _row.output_tokens + bindparam("add_output_tokens"),
            "cost_usd": _row.cost_usd + bindparam("add_cost_usd"),
            "unpriced_calls": _row.unpriced_calls + bindparam("add_unpriced_calls"),
        }
    )
)

#: One model call of a governed turn added to the subagent's totals (in that call's receipt transaction).
_ADD_SPEND = Prepared(
    update(subagents)
    .where(_row.id == bindparam("subagent_id"))
    .values(
        {
            "input_tokens": _row.input_tokens + bindparam("add_input_tokens"),
            "output_tokens": _row.output_tokens + bindparam("add_output_tokens"),
            "cost_usd": _row.cost_usd + bindparam("add_cost_usd"),
            "unpriced_calls": _row.unpriced_calls + bindparam("add_unpriced_calls"),
        }
    )
)


def add_spend(connection: Transaction, subagent_id: str, spend: ModelReply) -> None:
    """Add one model call to the subagent's totals (whatever its status: the call was receipted)."""
    _ADD_SPEND.rowcount(
        connection,
        subagent_id=subagent_id,
        add_input_tokens=spend.input_tokens,
        add_output_tokens=spend.output_tokens,
        add_cost_usd=spend.cost_usd or 0.0,
        add_unpriced_calls=1 if spend.cost_usd is None else 0,
    )


#: One model call of a subagent added to an ancestor's delegated spend.
_ADD_DELEGATED = Prepared(
    update(subagents)
    .where(_row.id == bindparam("subagent_id"))
    .values(
        {
            "delegated_tokens": _row.delegated_tokens + bindparam("add_tokens"),
            "delegated_cost_usd": _row.delegated_cost_usd + bindparam("add_cost_usd"),
        }
    )
)


def add_delegated(connection: Transaction, ancestors: list[str], spend: ModelReply) -> None:
    """Add a subagent's model call to each ancestor subagent's delegated spend (its budget covers it)."""
    for ancestor in ancestors:
        _ADD_DELEGATED.rowcount(
            connection,
            subagent_id=ancestor,
            add_tokens=spend.input_tokens + spend.output_tokens,
            add_cost_usd=spend.cost_usd or 0.0,
        )


def count_active(connection: Transaction, agent: str | None) -> int:
    """How many subagents of ``agent`` (None: the operator's) are queued or running."""
    if agent is None:
        return int(_COUNT_ACTIVE_NO_AGENT.scalar(connection))
    return int(_COUNT_ACTIVE.scalar(connection, agent=agent))


#: A subagent's row as this process wrote it (every column; those a spawn does not write are NULL).
StoredRow = namedtuple("StoredRow", [column.key for column in subagents.columns])  # type: ignore[misc]
_UNWRITTEN = {column.key: None for column in subagents.columns if column.key not in SPAWN_COLUMNS}


def insert_subagent(connection: Transaction, **values: Any) -> Any:
    """The subagent's row, with every column of :data:`SPAWN_COLUMNS` (no ``delegation``: none kept);
    returns it as :func:`load` reads it back (a :data:`StoredRow`), for its first turn."""
    values.setdefault("delegation", None)
    values.setdefault("delegated_tokens", 0)
    values.setdefault("delegated_cost_usd", 0.0)
    _INSERT.rowcount(connection, **{f"new_{name}": value for name, value in values.items()})
    return StoredRow(**_UNWRITTEN, **values)


_STATUS = Prepared(select(_row.status).where(_row.id == bindparam("subagent_id")))


def status(connection: Transaction, subagent_id: str) -> str | None:
    """The subagent's status (None when unknown)."""
    value = _STATUS.scalar(connection, subagent_id=subagent_id)
    return None if value is None else str(value)


def add_message(
    connection: Transaction,
    subagent_id: str,
    position: int,
    role: str,
    content: str,
    latency: float | None = None,
) -> None:
    """One message of the conversation, at ``position``."""
    _INSERT_MESSAGE.rowcount(
        connection,
        new_subagent_id=subagent_id,
        new_position=position,
        new_role=role,
        new_content=content,
        new_at=utc_now(),
        new_latency_seconds=latency,
    )


def end(
    connection: Connection,
    subagent_id: str,
    status: str,
    *,
    error: str,
    error_class: str,
    now: str,
    **more: Any,
) -> bool:
    """End a subagent that is still active (queued or running) with ``status``, ``error`` and ``error_class``
    (and ``more`` columns); False when it had already ended."""
    ended = connection.execute(
        update(subagents)
        .where(_row.id == subagent_id, _ACTIVE)
        .values(status=status, error=error, error_class=error_class, updated_at=now, finished_at=now, **more)
    ).rowcount
    return ended > 0


def load(connection: Transaction, subagent_id: str) -> tuple[Any | None, list[ChatTurn]]:
    """The subagent's row (None when unknown) and its conversation, oldest first."""
    row = _SELECT.first(connection, subagent_id=subagent_id)
    if row is None:
        return None, []
    messages = _MESSAGES.all(connection, subagent_id=subagent_id)
    return row, [ChatTurn(m.role, m.content) for m in messages]


def pre_call(connection: Transaction, subagent_id: str) -> Any | None:
    """The subagent's status and budget columns (None when unknown), read before each governed model call."""
    return _PRE_CALL.first(connection, subagent_id=subagent_id)


def complete(
    connection: Transaction, subagent_id: str, result: str, now: str, spend: ModelReply | None
) -> bool:
    """Record a running turn's answer (and, with ``spend``, its one model call in the totals); False when
    the subagent is no longer running (cancelled meanwhile)."""
    if spend is None:
        return _COMPLETE.rowcount(connection, subagent_id=subagent_id, answer=result, now=now) > 0
    return (
        _COMPLETE_COUNTING.rowcount(
            connection,
            subagent_id=subagent_id,
            answer=result,
            now=now,
            add_input_tokens=spend.input_tokens,
            add_output_tokens=spend.output_tokens,
            add_cost_usd=spend.cost_usd or 0.0,
            add_unpriced_calls=1 if spend.cost_usd is None else 0,
        )
        > 0
    )


_MESSAGE_COUNT = Prepared(
    select(func.count()).where(subagent_messages.c.subagent_id == bindparam("subagent_id"))
)


def message_count(connection: Transaction, subagent_id: str) -> int:
    """How many messages the conversation holds (the next one's position)."""
    return int(_MESSAGE_COUNT.scalar(connection, subagent_id=subagent_id))


#: The columns ``mcp_list_subagents`` shows.
_LISTED = (
    _row.id,
    _row.status,
    _row.role,
    _row.mode,
    _row.context_strategy,
    _row.created_at,
    _row.updated_at,
    _row.task,
    _row.agent,
)
_LIST_STATEMENTS: dict[tuple[bool, bool, bool], Prepared] = {}


def _list_statement(by_status: bool, by_agent: bool, after: bool) -> Prepared:
    """One of the list's eight shapes (with or without a status, an agent, a position), built once."""
    key = (by_status, by_agent, after)
    statement = _LIST_STATEMENTS.get(key)
    if statement is None:
        query = select(*_LISTED).order_by(_row.created_at.desc(), _row.id.desc()).limit(bindparam("limit"))
        if by_status:
            query = query.where(_row.status == bindparam("status"))
        if by_agent:
            query = query.where(_row.agent == bindparam("agent"))
        if after:
            created: Any = bindparam("after_created")
            query = query.where(
                or_(
                    _row.created_at < created,
                    (_row.created_at == created) & (_row.id < bindparam("after_id")),
                )
            )
        statement = _LIST_STATEMENTS[key] = Prepared(query)
    return statement


def list_rows(
    connection: Transaction, status: str | None, limit: int, after: tuple[str, str] | None, agent: str | None
) -> list[Any]:
    """Up to ``limit`` subagents, newest first, of ``status`` and ``agent`` when given, after ``after``
    (``(created_at, id)`` of the last one seen)."""
    params: dict[str, Any] = {"limit": limit, "status": status, "agent": agent}
    if after is not None:
        params["after_created"], params["after_id"] = after
    return _list_statement(bool(status), agent is not None, after is not None).all(connection, **params)
