"""Receipts (SPEC.md section 4): canonical JSON, the hash chain, redaction and the credential guard."""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import anyio
from pydantic import BaseModel
from sqlalchemy import Connection, bindparam, insert, select, update

from baton.chain_verify import GENESIS_SHA256, ChainReport, dict_rows, verify_rows
from baton.errors import BatonError
from baton.evidence.canonical import canonical_json, sha256_hex, utc_now
from baton.evidence.redaction import CREDENTIAL_PATTERN, MIN_SUBSTRING_SECRET, REDACTED, Redactor
from baton.store.engine import DriverTransaction, Store
from baton.store.schema import receipt_head, receipts

#: Canonical JSON and redaction live in their own light modules; receipts re-exports them as one API.
__all__ = [
    "CREDENTIAL_PATTERN",
    "GENESIS_SHA256",
    "MIN_SUBSTRING_SECRET",
    "REDACTED",
    "ChainReport",
    "Receipt",
    "ReceiptLog",
    "Redactor",
    "canonical_json",
    "receipt_digest",
    "sha256_hex",
    "utc_now",
    "verify_chain",
]

#: Rows fetched per round trip while verifying (a server-side cursor on PostgreSQL).
VERIFY_BATCH = 2000


class Receipt(BaseModel):
    """One link of the chain."""

    seq: int
    kind: str
    at: str
    payload: dict[str, Any]
    prev_sha256: str
    sha256: str


def receipt_digest(seq: int, kind: str, at: str, payload: dict[str, Any], prev_sha256: str) -> str:
    """sha256 of the canonical JSON of a receipt without its own hash."""
    body = {"seq": seq, "kind": kind, "at": at, "payload": payload, "prev_sha256": prev_sha256}
    return sha256_hex(canonical_json(body))


def receipt_digest_of_serialized(seq: int, kind: str, at: str, payload_json: str, prev_sha256: str) -> str:
    """:func:`receipt_digest` from the payload's canonical JSON already written: the body's canonical text
    is its sorted keys around that text (the same bytes, without serializing the payload a second time)."""
    text = canonical_json
    return sha256_hex(
        f'{{"at":{text(at)},"kind":{text(kind)},"payload":{payload_json},'
        f'"prev_sha256":{text(prev_sha256)},"seq":{int(seq)}}}'
    )


#: The append statements, built once: building them per call (``insert(...).values(...)``) cost more than
#: the SQLite work itself, because SQLAlchemy re-derives each new statement's cache key.
_SELECT_HEAD = (
    select(receipt_head.c.seq, receipt_head.c.sha256)
    .where(receipt_head.c.id == bindparam("head_id"))
    .with_for_update()
)
_INSERT_RECEIPT = insert(receipts)
_UPDATE_HEAD = update(receipt_head).where(receipt_head.c.id == bindparam("head_id"))
_INSERT_HEAD = insert(receipt_head)
_SQLITE_SQL: dict[int, tuple[str, tuple[str, ...]]] = {}


def _execute(connection: Connection | DriverTransaction, statement: Any, params: dict[str, Any]) -> Any:
    """Run one append statement: through SQLAlchemy, or on SQLite straight on the driver's cursor with the
    SQL SQLAlchemy compiled once (its per-call execution machinery cost twice SQLite's own work)."""
    if isinstance(connection, DriverTransaction):
        driver = connection.driver
    elif connection.dialect.name != "sqlite":
        return connection.execute(statement, params)
    else:
        driver = connection.connection.driver_connection
    sql = _SQLITE_SQL.get(id(statement))
    if sql is None:
        compiled = statement.compile(dialect=connection.dialect, column_keys=list(params))
        sql = _SQLITE_SQL[id(statement)] = (compiled.string, tuple(compiled.positiontup or ()))
    assert driver is not None
    return driver.execute(sql[0], tuple(params[name] for name in sql[1]))


#: The name under which a transaction holds the head it moved (:class:`~baton.store.engine.DriverTransaction`).
_HEAD = "receipt_head"


def _chain_head(connection: Connection | DriverTransaction) -> tuple[int, str] | None:
    """The chain's tip (seq, sha256), locked for this transaction where the database can lock a row (or
    as an earlier append of this transaction left it)."""
    if isinstance(connection, DriverTransaction) and _HEAD in connection.held:
        held: tuple[int, str] = connection.held[_HEAD]
        return held
    head = _execute(connection, _SELECT_HEAD, {"head_id": 1}).fetchone()  # a Result or a sqlite3 cursor
    return (int(head[0]), str(head[1])) if head else None


def _move_head(connection: Connection | DriverTransaction, seq: int, sha256: str) -> None:
    """Move the chain's tip: in a SQLite write transaction once, just before it commits (the appends of
    one transaction, a spawn's or a model call's two, read and write the head row once); else now."""
    if not isinstance(connection, DriverTransaction) or connection.before_commit is None:
        _execute(connection, _UPDATE_HEAD, {"seq": seq, "sha256": sha256, "head_id": 1})
        return
    connection.held[_HEAD] = (seq, sha256)
    connection.before_commit.setdefault(_HEAD, partial(_write_held_head, connection))


def _write_held_head(transaction: DriverTransaction) -> None:
    """Write the head a transaction's appends left in :attr:`~DriverTransaction.held` (before its commit)."""
    seq, sha256 = transaction.held[_HEAD]
    _execute(transaction, _UPDATE_HEAD, {"seq": seq, "sha256": sha256, "head_id": 1})


class ReceiptLog:
    """The append-only, hash-chained log of everything baton did."""

    def __init__(self, store: Store, redactor: Redactor) -> None:
        self.store = store
        self.redactor = redactor
        #: Set by ``baton serve --http``: :meth:`append_soon` commits concurrent appends together.
        self.group_commit = False
        #: MCP requests the HTTP server is serving now (:class:`baton.http.inflight.InFlight`): with group
        #: commit, a receipt appended while it is at most 1 is committed inline (see :meth:`append_soon`).
        self.in_flight = 0
        self._queued: builtins.list[tuple[str, dict[str, Any], asyncio.Future[Receipt]]] = []
        self._committer: asyncio.Task[None] | None = None

    def append(self, kind: str, payload: dict[str, Any]) -> Receipt:
        """Redact, guard and append one receipt in its own transaction (on SQLite, held on the driver)."""
        if self.store.is_sqlite:
            with self.store.write_driver() as transaction:
                return self.append_in(transaction, kind, payload)
        with self.store.write() as connection:
            return self.append_in(connection, kind, payload)

    def append_in(
        self, connection: Connection | DriverTransaction, kind: str, payload: dict[str, Any]
    ) -> Receipt:
        """Append inside the caller's transaction, so a receipt and the state it records commit together."""
        clean, serialized = self.redactor.canonical(payload, f"a {kind} receipt")
        return self._link(connection, [(kind, clean, serialized)])[0]

    async def append_soon(self, kind: str, payload: dict[str, Any]) -> Receipt:
        """:meth:`append` for a call being answered on the event loop; returns once the receipt is committed.

        With :attr:`group_commit` (``baton serve --http``) the append is queued, and the appends queued
        while one transaction commits are committed together in the next (group commit), in a worker
        thread, in the order they were queued: the loop goes on serving other requests meanwhile, and each
        caller still answers only after its own receipt is durable. Without it (stdio: one client) the
        append is made inline, as :meth:`append`; so is one made while the HTTP server serves no other MCP
        request (:attr:`in_flight`) and nothing is queued or committing: a batch of one gains nothing from
        the worker thread, and its two thread hops were most of a lone HTTP call's latency.
        """
        loop = asyncio.get_running_loop()
        committer = self._committer
        if not self.group_commit or (committer is not None and committer.get_loop() is not loop):
            return self.append(kind, payload)  # (a committer of another event loop is never waited on)
        if self.in_flight <= 1 and committer is None and not self._queued:
            return self.append(kind, payload)
        future: asyncio.Future[Receipt] = loop.create_future()
        self._queued.append((kind, payload, future))
        if self._committer is None:
            self._committer = loop.create_task(self._commit_queued())
        return await future

    async def _commit_queued(self) -> None:
        """Commit the queue batch by batch until it is empty (a batch that fails fails each of its callers)."""
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                outcomes: Sequence[Receipt | Exception]
                try:
                    outcomes = await anyio.to_thread.run_sync(
                        self.append_many, [(kind, payload) for kind, payload, _ in batch]
                    )
                except Exception as exc:  # the transaction failed: no receipt of the batch was written
                    outcomes = [exc] * len(batch)
                for (_, _, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():  # its caller was cancelled; the receipt is written all the same
                        continue
                    if isinstance(outcome, Receipt):
                        future.set_result(outcome)
                    else:
                        future.set_exception(outcome)
        finally:
            self._committer = None

    def append_many(
        self, items: builtins.list[tuple[str, dict[str, Any]]]
    ) -> builtins.list[Receipt | BatonError]:
        """Append ``items`` in order in one transaction; a payload refused by the credential guard is
        skipped (its outcome is the error) and the others are appended."""
        refused: dict[int, BatonError] = {}
        links: builtins.list[tuple[str, dict[str, Any], str]] = []
        for index, (kind, payload) in enumerate(items):
            try:
                clean, serialized = self.redactor.canonical(payload, f"a {kind} receipt")
            except BatonError as exc:
                refused[index] = exc
            else:
                links.append((kind, clean, serialized))
        made: builtins.list[Receipt] = []
        if links and self.store.is_sqlite:
            with self.store.write_driver() as transaction:
                made = self._link(transaction, links)
        elif links:
            with self.store.write() as connection:
                made = self._link(connection, links)
        appended = iter(made)
        return [refused[index] if index in refused else next(appended) for index in range(len(items))]

    def _link(
        self,
        connection: Connection | DriverTransaction,
        links: builtins.list[tuple[str, dict[str, Any], str]],
    ) -> builtins.list[Receipt]:
        """Chain already-serialized payloads onto the head, in order, inside the caller's transaction:
        the head is read (locked) once and moved once."""
        head = _chain_head(connection)
        seq, prev = head if head else (0, GENESIS_SHA256)
        made: builtins.list[Receipt] = []
        for kind, clean, serialized in links:
            seq += 1
            at = utc_now()
            digest = receipt_digest_of_serialized(seq, kind, at, serialized, prev)
            _execute(
                connection,
                _INSERT_RECEIPT,
                {
                    "seq": seq,
                    "kind": kind,
                    "at": at,
                    "payload": serialized,
                    "prev_sha256": prev,
                    "sha256": digest,
                },
            )
            # every field was just computed here; validating them again would only cost time
            made.append(
                Receipt.model_construct(
                    seq=seq, kind=kind, at=at, payload=clean, prev_sha256=prev, sha256=digest
                )
            )
            prev = digest
        if head:
            _move_head(connection, seq, prev)
        else:
            _execute(connection, _INSERT_HEAD, {"id": 1, "seq": seq, "sha256": prev})
        return made

    def list(self, *, kind: str | None = None, limit: int = 100, after_seq: int = 0) -> list[Receipt]:
        """Receipts in chain order, optionally of one kind."""
        query = select(receipts).where(receipts.c.seq > after_seq).order_by(receipts.c.seq).limit(limit)
        if kind:
            query = query.where(receipts.c.kind == kind)
        with self.store.read() as connection:
            rows = connection.execute(query).all()
        return [_row_to_receipt(row) for row in rows]

    def newest(self, *, kind: str | None = None, limit: int = 100) -> builtins.list[Receipt]:
        """The latest ``limit`` receipts, the newest first, optionally of one kind."""
        query = select(receipts).order_by(receipts.c.seq.desc()).limit(limit)
        if kind:
            query = query.where(receipts.c.kind == kind)
        with self.store.read() as connection:
            rows = connection.execute(query).all()
        return [_row_to_receipt(row) for row in rows]

    def kinds(self) -> builtins.list[str]:
        """Every kind the chain holds, sorted."""
        with self.store.read() as connection:
            return sorted(connection.execute(select(receipts.c.kind).distinct()).scalars())

    def get(self, seq: int) -> Receipt | None:
        """One receipt by sequence number."""
        with self.store.read() as connection:
            row = connection.execute(select(receipts).where(receipts.c.seq == seq)).first()
        return _row_to_receipt(row) if row else None

    def verify(
        self,
        checkpoints: Iterable[Mapping[str, Any]] = (),
        public_keys: Mapping[str, bytes] | None = None,
    ) -> ChainReport:
        """Recompute every hash and link from the stored rows, streamed in constant memory, and check the
        signed ``checkpoints`` against ``public_keys``.

        Rows are read up to the head read first, in one read transaction, so appends made meanwhile by
        other writers are simply not part of this verification (on every database).
        """
        columns = [receipts.c[name] for name in ("seq", "kind", "at", "payload", "prev_sha256", "sha256")]
        with self.store.read() as connection:
            head = connection.execute(select(receipt_head).where(receipt_head.c.id == 1)).first()
            query = select(*columns).order_by(receipts.c.seq)
            if head is not None:
                query = query.where(receipts.c.seq <= head.seq)
            streamed = connection.execution_options(stream_results=True, yield_per=VERIFY_BATCH)
            rows = (tuple(row) for row in streamed.execute(query))
            return verify_rows(
                rows,
                head=(int(head.seq), str(head.sha256)) if head is not None else None,
                checkpoints=checkpoints,
                public_keys=public_keys,
            )


def verify_chain(rows: Iterable[Mapping[str, Any]], head_sha256: str | None = None) -> ChainReport:
    """Check each row's hash, its link to the previous row and the sequence numbering."""
    report = verify_rows(dict_rows(rows))
    if report.ok and head_sha256 is not None and head_sha256 != report.head_sha256:
        return ChainReport(
            False,
            report.count,
            report.head_sha256,
            None,
            "the chain head does not match the last receipt",
            "receipt_chain_broken",
        )
    return report


def _row_to_receipt(row: Any) -> Receipt:
    try:
        payload = json.loads(row.payload)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):  # a damaged row is shown as such; `receipts verify` names it
        payload = {"unreadable_payload": True}
    return Receipt(
        seq=row.seq,
        kind=row.kind,
        at=row.at,
        payload=payload,
        prev_sha256=row.prev_sha256,
        sha256=row.sha256,
    )
