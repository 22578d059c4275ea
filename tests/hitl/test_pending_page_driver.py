"""The pending page read straight on SQLite's driver (baton.store.prepared) gives the rows SQLAlchemy gives,
damaged rows included, and its folded due check still sweeps an expired request before listing."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from baton.hitl.broker import HitlBroker, NewRequest
from baton.hitl.pending_page import _ALL_AGENTS, _ONE_AGENT, MAX_SKIPPED_LISTED, decode_cursor
from baton.runtime import Runtime
from baton.store.schema import hitl_requests

pytestmark = pytest.mark.anyio


async def seed(broker: HitlBroker) -> list[str]:
    """Requests of two agents, urgent and plain, with JSON columns; two of them damaged in the store."""
    ids = []
    for n in range(6):
        new = NewRequest(
            "input" if n % 2 else "approval",
            f"ask {n}",
            context={"n": n, "nested": [1, {"x": None}]},
            options=["a", "b"] if n % 2 else None,
            timeout_seconds=600 + n,
            urgent=n % 3 == 0,
            agent="ada" if n < 4 else "bob",
            required_approvals=2 if n == 2 else None,
        )
        ids.append((await broker.create(new))["request_id"])
    with broker.runtime.store.write() as connection:  # written behind baton's back, as sqlite3 would
        connection.exec_driver_sql("UPDATE hitl_requests SET expires_epoch = 'soon' WHERE id = ?", (ids[1],))
        connection.exec_driver_sql(
            "UPDATE hitl_requests SET urgent = 'x', context = '{not json' WHERE id = ?", (ids[3],)
        )
    return ids


async def test_every_page_statement_reads_the_same_rows_on_the_driver_as_through_sqlalchemy(
    broker: HitlBroker, runtime: Runtime
) -> None:
    await seed(broker)
    first = broker.page_pending(1)
    assert first.next_cursor is not None
    urgent, expires, after_id = decode_cursor(first.next_cursor)
    base = {"now": 1.0, "limit": 10, "skipped_limit": MAX_SKIPPED_LISTED}
    cursor = {"urgent": urgent, "expires": expires, "after_id": after_id}
    compared = 0
    for statements, agent in (
        (_ALL_AGENTS, {}),
        (_ONE_AGENT, {"agent": "ada"}),
        (_ONE_AGENT, {"agent": "x"}),
    ):
        for prepared, extra in (
            (statements.first, {}),
            (statements.after, cursor),
            (statements.meta, {}),
            (statements.unpageable, {}),
        ):
            params = {**base, **agent, **extra}
            with runtime.store.read() as connection:  # through SQLAlchemy's own execution
                expected = [
                    (tuple(row), row._asdict()) for row in connection.execute(prepared.statement, params)
                ]
            with runtime.store.read_prepared() as transaction:
                got = [(tuple(row), row._asdict()) for row in prepared.all(transaction, **params)]
            assert got == expected
            assert [[type(value) for value in row] for row, _ in got] == [
                [type(value) for value in row] for row, _ in expected
            ]
            compared += len(expected)
    assert compared > 10  # the comparison saw real rows, not only empty results


async def test_a_page_sweeps_a_request_past_its_expiry_before_listing(
    broker: HitlBroker, runtime: Runtime
) -> None:
    ids = [
        (await broker.create(NewRequest("approval", f"ask {n}", timeout_seconds=600)))["request_id"]
        for n in range(3)
    ]
    with runtime.store.write() as connection:
        connection.execute(
            update(hitl_requests).where(hitl_requests.c.id == ids[0]).values(expires_epoch=1.0)
        )
    page = broker.page_pending(10)
    assert sorted(view["request_id"] for view in page.requests) == sorted(ids[1:])
    assert page.total == 2
    assert broker.get(ids[0])["status"] == "expired"
    assert [r.payload["request_id"] for r in runtime.receipts.list(kind="hitl_expired")] == [ids[0]]


async def test_a_damaged_row_is_skipped_on_the_first_page_alone_and_the_rest_listed(
    broker: HitlBroker,
) -> None:
    ids = await seed(broker)
    page = broker.page_pending(10, agent="ada")
    assert sorted(view["request_id"] for view in page.requests) == sorted([ids[0], ids[2]])
    assert sorted(entry["request_id"] for entry in page.skipped) == sorted([ids[1], ids[3]])
    assert page.total == 4
    quorum = next(view for view in page.requests if view["request_id"] == ids[2])
    assert quorum["required_approvals"] == 2 and quorum["approvals"] == []


@pytest.mark.parametrize("scoped", [True, False])
def test_a_page_is_an_index_range_read_never_a_sort_of_every_pending_row(
    runtime: Runtime, scoped: bool
) -> None:
    """SQLite's own plan for each page statement: an index in the pending order, no temporary sort (a sort
    reads every pending row: 196 ms a page at 100,000 before ``ix_hitl_requests_agent_pending_order``)."""
    statements = _ONE_AGENT if scoped else _ALL_AGENTS
    expected = "ix_hitl_requests_agent_pending_order" if scoped else "ix_hitl_requests_pending_order"
    dialect = runtime.store.engine.dialect
    for prepared in (statements.first, statements.after):
        compiled = prepared.statement.compile(dialect=dialect)
        values = {"agent": "ada", "limit": 10, "expires": 1.0, "after_id": "hr_", "urgent": 1, "now": 0.0}
        params = [compiled.params.get(name, values.get(name)) for name in compiled.positiontup or ()]
        with runtime.store.read() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled.string}", tuple(params)).all()
        details = " | ".join(str(row[-1]) for row in plan)
        assert expected in details, details
        assert "TEMP B-TREE" not in details, details
    # the count's "any row no page can hold" is a range read of the expiry index, not a walk of the rows
    compiled = statements.meta.statement.compile(dialect=dialect)
    values = {"agent": "ada", "now": 0.0}
    params = [compiled.params.get(name, values.get(name)) for name in compiled.positiontup or ()]
    with runtime.store.read() as connection:
        plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled.string}", tuple(params)).all()
    assert "(status=? AND expires_epoch>?)" in " | ".join(str(row[-1]) for row in plan)
