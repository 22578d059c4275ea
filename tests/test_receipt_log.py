"""ReceiptLog's reading side and its less travelled write paths: paging, one receipt by seq, damaged rows,
a store without its head row, the head bound of ``verify``, the SQLite statement cache and ``verify_chain``.

Written for the survivors of the mutation run over ``receipts.py`` (docs/testing.md).
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, insert, select, update

from baton.errors import ReceiptError
from baton.evidence import receipts as receipts_module
from baton.evidence.receipts import GENESIS_SHA256, ReceiptLog, Redactor, receipt_digest, verify_chain
from baton.store.engine import Store
from baton.store.schema import receipt_head, receipts


@pytest.fixture
def log(tmp_path) -> ReceiptLog:
    return ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor())


def head_row(log: ReceiptLog) -> tuple[int, int, str] | None:
    with log.store.read() as connection:
        row = connection.execute(select(receipt_head)).first()
    return (row.id, row.seq, row.sha256) if row else None


def test_a_receipt_round_trips_through_list_and_get_on_each_database(database_url: str) -> None:
    log = ReceiptLog(Store(database_url), Redactor())
    appended = log.append("round_trip", {"n": 1, "text": "é"})
    assert (appended.seq, appended.kind, appended.payload) == (1, "round_trip", {"n": 1, "text": "é"})
    (listed,) = log.list()
    assert listed == appended
    assert log.get(1) == appended
    assert log.get(2) is None
    log.store.engine.dispose()


def test_list_pages_after_a_seq_filters_by_kind_and_stops_at_the_limit(log: ReceiptLog) -> None:
    for n in range(101):
        log.append("odd" if n % 2 else "even", {"n": n})
    assert [r.seq for r in log.list()] == list(range(1, 101))  # the default page is 100
    assert [r.seq for r in log.list(limit=3)] == [1, 2, 3]
    assert [r.seq for r in log.list(after_seq=99)] == [100, 101]
    assert [r.payload["n"] for r in log.list(kind="odd", limit=2)] == [1, 3]
    assert [r.seq for r in log.list(kind="odd", after_seq=96)] == [98, 100]


@pytest.mark.parametrize("stored", ['{"n": ', "[1, 2]", "null"])
def test_a_damaged_payload_is_listed_as_unreadable(log: ReceiptLog, stored: str) -> None:
    for n in range(2):
        log.append("test", {"n": n})
    with log.store.write() as connection:
        connection.execute(update(receipts).where(receipts.c.seq == 2).values(payload=stored))
    assert [r.payload for r in log.list()] == [{"n": 0}, {"unreadable_payload": True}]
    damaged = log.get(2)
    assert damaged is not None
    assert damaged.payload == {"unreadable_payload": True}


def test_a_store_without_its_head_row_starts_from_genesis_and_recreates_it(log: ReceiptLog) -> None:
    with log.store.write() as connection:
        connection.execute(delete(receipt_head))
    empty = log.verify()
    assert (empty.ok, empty.count) == (True, 0)
    first = log.append("test", {"n": 1})
    assert (first.seq, first.prev_sha256) == (1, GENESIS_SHA256)
    assert head_row(log) == (1, 1, first.sha256)
    second = log.append("test", {"n": 2})
    assert (second.seq, second.prev_sha256) == (2, first.sha256)
    assert head_row(log) == (1, 2, second.sha256)
    report = log.verify()
    assert (report.ok, report.count, report.head_sha256) == (True, 2, second.sha256)


def test_verify_stops_at_the_head_it_read_first(log: ReceiptLog) -> None:
    """A row past the head is what another writer's commit looks like mid-verification on PostgreSQL."""
    first = log.append("test", {"n": 1})
    later = {"seq": 2, "kind": "test", "at": first.at, "payload": {"n": 2}, "prev_sha256": first.sha256}
    row = {**later, "payload": json.dumps(later["payload"]), "sha256": receipt_digest(**later)}
    with log.store.write() as connection:
        connection.execute(insert(receipts).values(**row))
    report = log.verify()
    assert (report.ok, report.count, report.head_sha256) == (True, 1, first.sha256)


def test_sqlite_appends_compile_each_statement_once_from_a_cold_cache(
    log: ReceiptLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh process's first appends compile the SQL; later ones reuse it (one cache entry each)."""
    cache: dict[int, tuple[str, tuple[str, ...]]] = {}
    monkeypatch.setattr(receipts_module, "_SQLITE_SQL", cache)
    for n in range(3):
        log.append("test", {"n": n})
    statements = (receipts_module._SELECT_HEAD, receipts_module._INSERT_RECEIPT, receipts_module._UPDATE_HEAD)
    assert set(cache) == {id(statement) for statement in statements}
    assert [r.payload for r in log.list()] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert head_row(log) == (1, 3, log.list()[-1].sha256)
    assert log.verify().ok


def test_a_secret_spanning_the_payloads_json_is_refused_naming_the_receipt(tmp_path) -> None:
    """No single string holds the secret, so redaction leaves it; the guard on the whole text catches it."""
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor(('k":1,"zz',)))
    with pytest.raises(ReceiptError) as caught:
        log.append("spanning", {"k": 1, "zz": 2})
    assert caught.value.error_class == "receipt_contains_secret"
    assert "a spanning receipt" in str(caught.value)
    assert log.list() == []


def test_verify_chain_checks_exported_rows_and_the_head_they_should_end_at(log: ReceiptLog) -> None:
    exported = [r.model_dump() for r in (log.append("test", {"n": n}) for n in range(3))]
    head = exported[-1]["sha256"]
    assert verify_chain(exported).ok
    matched = verify_chain(exported, head_sha256=head)
    assert (matched.ok, matched.count, matched.head_sha256) == (True, 3, head)
    moved = verify_chain(exported[:2], head_sha256=head)
    assert moved.ok is False  # a bool, as every report's
    assert (moved.count, moved.head_sha256, moved.first_bad_seq) == (2, exported[1]["sha256"], None)
    assert moved.reason == "the chain head does not match the last receipt"
    assert moved.error_class == "receipt_chain_broken"
    broken = verify_chain([exported[0], exported[2]], head_sha256="f" * 64)
    assert not broken.ok
    assert broken.first_bad_seq == 3


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"n": 1},
        {
            "tool": "mcp_ping",
            "agent": "stdio",
            "success": True,
            "error_class": None,
            "duration_seconds": 1e-06,
        },
        {"text": 'é "quoted" \\ \n\t \u2028 \x00', "nested": {"z": [1, 2.5, None, False], "a": {}}},
        {"big": 2**70, "negative": -3, "keys": {"é": 1, "E": 2, "e": 3}},
    ],
)
def test_the_digest_from_the_written_payload_text_is_the_digest_of_the_body(
    payload: dict[str, object],
) -> None:
    """The append hashes the payload's canonical text in place; it must equal hashing the whole body."""
    at, prev = "2026-12-03T17:00:00.123456+00:00", "ab" * 32
    assert receipts_module.receipt_digest_of_serialized(
        42, "tool_call", at, receipts_module.canonical_json(payload), prev
    ) == receipt_digest(42, "tool_call", at, payload, prev)


def test_a_refused_append_leaves_the_kept_connection_usable_and_the_chain_whole(tmp_path) -> None:
    """The SQLite writer keeps one driver connection; a refusal inside its transaction rolls back there."""
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor(('k":1,"zz',)))
    first = log.append("test", {"n": 1})
    with pytest.raises(ReceiptError):
        log.append("spanning", {"k": 1, "zz": 2})
    second = log.append("test", {"n": 2})
    assert (second.seq, second.prev_sha256) == (2, first.sha256)
    assert [r.payload for r in log.list()] == [{"n": 1}, {"n": 2}]
    assert head_row(log) == (1, 2, second.sha256)
    assert log.verify().ok


def test_appenders_in_two_processes_on_one_store_keep_one_chain(tmp_path) -> None:
    """Each process keeps its own writer connection; SQLite's write lock still orders them on one head."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'r.db'}"
    log = ReceiptLog(Store(url), Redactor())
    script = (
        "import sys\n"
        "from baton.evidence.receipts import ReceiptLog, Redactor\n"
        "from baton.store.engine import Store\n"
        "log = ReceiptLog(Store(sys.argv[1]), Redactor())\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "for n in range(200):\n"
        "    log.append('theirs', {'n': n})\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert other.stdout is not None and other.stdin is not None
    assert other.stdout.readline() == "ready\n"
    other.stdin.write("go\n")
    other.stdin.flush()
    for n in range(200):
        log.append("mine", {"n": n})
    assert other.wait(timeout=3600) == 0
    other.stdin.close()
    other.stdout.close()
    report = log.verify()
    assert (report.ok, report.count) == (True, 400)
    kinds = [r.kind for r in log.list(limit=400)]
    assert kinds.count("mine") == kinds.count("theirs") == 200


def _statements_of(log: ReceiptLog, run: object) -> list[str]:
    """The SQL the kept writer connection runs while ``run`` is called (its first word and table)."""
    seen: list[str] = []
    with log.store.write_driver() as transaction:  # opens (and keeps) the writer connection
        transaction.driver.set_trace_callback(lambda sql: seen.append(" ".join(sql.split()[:3])))
    try:
        run()  # type: ignore[operator]
    finally:
        with log.store.write_driver() as transaction:
            transaction.driver.set_trace_callback(None)
    return seen


def test_appends_in_one_sqlite_transaction_read_and_move_the_head_once(log: ReceiptLog) -> None:
    """A spawn's two receipts, or a model call's: the head row is read at the first and written once, just
    before the commit, with the last one's seq and sha256."""

    def two_appends() -> None:
        with log.store.write_prepared() as transaction:
            log.append_in(transaction, "first", {"n": 1})
            log.append_in(transaction, "second", {"n": 2})

    seen = _statements_of(log, two_appends)
    begun = seen.index("BEGIN IMMEDIATE")
    assert seen[begun : begun + 6] == [
        "BEGIN IMMEDIATE",
        "SELECT receipt_head.seq, receipt_head.sha256",
        "INSERT INTO receipts",
        "INSERT INTO receipts",
        "UPDATE receipt_head SET",
        "COMMIT",
    ]
    first, second = log.list()
    assert (second.seq, second.prev_sha256) == (2, first.sha256)
    assert head_row(log) == (1, 2, second.sha256)
    assert log.verify().ok


def test_a_rolled_back_transaction_leaves_the_head_where_it_was(log: ReceiptLog) -> None:
    """The head moved in a transaction is only written at its commit: a failure after the appends leaves the
    chain and its head as before, and the next transaction reads the head afresh."""
    first = log.append("test", {"n": 1})

    def appends_then_a_failure() -> None:
        with log.store.write_prepared() as transaction:
            log.append_in(transaction, "lost", {"n": 2})
            log.append_in(transaction, "lost", {"n": 3})
            raise RuntimeError("the caller's statement failed")

    with pytest.raises(RuntimeError):
        appends_then_a_failure()
    assert head_row(log) == (1, 1, first.sha256)
    second = log.append("test", {"n": 2})
    assert (second.seq, second.prev_sha256) == (2, first.sha256)
    assert [r.kind for r in log.list()] == ["test", "test"]
    assert log.verify().ok


def test_appends_on_a_connection_without_a_commit_step_move_the_head_at_once(log: ReceiptLog) -> None:
    """Outside a kept SQLite write transaction (SQLAlchemy's own, as on PostgreSQL) the head is written by
    each append, as before."""
    with log.store.write() as connection:
        log.append_in(connection, "first", {"n": 1})
        (seq,) = connection.execute(select(receipt_head.c.seq)).one()
        assert seq == 1
        second = log.append_in(connection, "second", {"n": 2})
    assert head_row(log) == (1, 2, second.sha256)
    assert log.verify().ok
