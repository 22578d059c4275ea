"""Statements built once (baton.store.prepared) store and read exactly what SQLAlchemy's own statements do."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import insert, select, text

from baton.models.client import ModelReply
from baton.store.engine import Store
from baton.store.schema import subagents
from baton.subagents import table

ROW: dict[str, Any] = {
    "role": "assistant",
    "task": "t",
    "mode": "async",
    "context_strategy": "minimal",
    "prepared_context": "",
    "filtered_fields": ["a.b", "secret"],
    "prep_tokens": 0,
    "status": "queued",
    "input_tokens": 0,
    "output_tokens": 0,
    "cost_usd": 0.25,
    "unpriced_calls": 0,
    "max_total_tokens": None,
    "max_cost_usd": 1.5,
    "tools": None,
    "tool_limit": None,
    "owner": "me",
    "lease_expires_at": "2026-01-01T00:00:00.000000Z",
    "created_at": "2026-01-01T00:00:00.000000Z",
    "updated_at": "2026-01-01T00:00:00.000000Z",
    "started_at": None,
    "agent": None,
}


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store(database_url)
    yield opened
    opened.dispose()


def _stored_text(store: Store, subagent_id: str) -> tuple[Any, ...]:
    """The JSON and float columns as the database holds them (no type processing)."""
    with store.read() as connection:
        row = connection.execute(
            text(
                "SELECT CAST(tools AS TEXT), CAST(filtered_fields AS TEXT), cost_usd, max_cost_usd "
                "FROM subagents WHERE id = :id"
            ),
            {"id": subagent_id},
        ).one()
    return tuple(row)


def test_a_prepared_insert_stores_what_sqlalchemy_stores_and_reads_back_alike(store: Store) -> None:
    with store.write() as connection:
        connection.execute(insert(subagents).values(id="sa_orm", **ROW))
    with store.write_prepared() as transaction:
        table.insert_subagent(transaction, id="sa_prepared", **ROW)

    assert _stored_text(store, "sa_prepared") == _stored_text(store, "sa_orm")
    with store.read() as connection:
        by_orm = connection.execute(select(subagents).where(subagents.c.id == "sa_prepared")).one()
    with store.read_prepared() as transaction:
        prepared, turns = table.load(transaction, "sa_orm")
        missing, none = table.load(transaction, "sa_unknown")
    assert prepared is not None
    assert {k: v for k, v in prepared._asdict().items() if k != "id"} == {
        k: v for k, v in by_orm._asdict().items() if k != "id"
    }
    assert prepared.filtered_fields == ["a.b", "secret"] and prepared.tools is None
    assert turns == [] and missing is None and none == []


def test_answer_and_message_count_change_only_what_they_should(store: Store) -> None:
    reply = ModelReply("hi", 3, 4, {"cost_usd": None, "latency_seconds": 0.05})
    started = {**ROW, "status": "running", "started_at": "2026-01-02T00:00:00.000000Z"}
    with store.write_prepared() as transaction:
        table.insert_subagent(transaction, id="sa_0", **ROW)  # queued: a row an earlier version left
        assert table.complete(transaction, "sa_0", "too early", "now", reply) is False  # not running
        table.insert_subagent(transaction, id="sa_1", **started)
        table.add_message(transaction, "sa_1", 0, "user", "t")
        assert table.complete(transaction, "sa_1", "hi", "2026-01-02T00:00:01.000000Z", reply) is True
        table.add_message(transaction, "sa_1", 1, "assistant", "hi", 0.05)
        assert table.complete(transaction, "sa_1", "again", "later", reply) is False  # completed already
        assert table.count_active(transaction, None) == 1  # the queued one
        assert table.message_count(transaction, "sa_1") == 2
    with store.read_prepared() as transaction:
        row, turns = table.load(transaction, "sa_1")
    assert row is not None
    assert (row.status, row.result, row.started_at) == ("completed", "hi", "2026-01-02T00:00:00.000000Z")
    assert (row.input_tokens, row.output_tokens, row.unpriced_calls, row.cost_usd) == (3, 4, 1, 0.25)
    assert [(t.role, t.content) for t in turns] == [("user", "t"), ("assistant", "hi")]


def test_a_failed_prepared_transaction_leaves_nothing(store: Store) -> None:
    def insert_then_fail() -> None:
        with store.write_prepared() as transaction:
            table.insert_subagent(transaction, id="sa_rolled_back", **ROW)
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        insert_then_fail()
    with store.read_prepared() as transaction:
        assert table.load(transaction, "sa_rolled_back") == (None, [])


def test_a_kept_connection_transaction_inside_another_is_refused_not_deadlocked(tmp_path: Any) -> None:
    store = Store(f"sqlite:///{tmp_path / 'baton.db'}")
    try:
        with store.write_prepared() as transaction:
            table.insert_subagent(transaction, id="sa_outer", **ROW)
            with pytest.raises(RuntimeError, match="inside another"), store.read_prepared():
                pass
        seen: list[Any] = []
        other = threading.Thread(target=lambda: seen.append(_loaded(store, "sa_outer")))
        other.start()
        other.join()
        assert seen == ["sa_outer"]  # the outer transaction committed; another thread takes its turn
    finally:
        store.dispose()


def _loaded(store: Store, subagent_id: str) -> Any:
    with store.read_prepared() as transaction:
        row, _turns = table.load(transaction, subagent_id)
    return None if row is None else row.id
