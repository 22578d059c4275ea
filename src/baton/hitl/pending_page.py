"""Keyset paging of pending requests: the pending order, opaque cursors and the page statements, built once.

A page is read on the ``ix_hitl_requests_pending_order`` index (``ix_hitl_requests_agent_pending_order``
for one agent's) after the cursor's position, so a page costs the same with 100 or 100,000 pending. The
broker decides when to sweep expired requests (:meth:`baton.hitl.broker.HitlBroker.page_pending`); this
module says what a page reads and how its rows become a :class:`PendingPage`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    and_,
    bindparam,
    cast,
    exists,
    literal_column,
    or_,
    select,
)

from baton.errors import ArgumentError
from baton.hitl.pending_count import PendingCount, capped_count
from baton.hitl.records import screen_requests
from baton.store.prepared import Prepared
from baton.store.rows import raw_json
from baton.store.schema import hitl_requests

if TYPE_CHECKING:
    from baton.store.engine import Store

#: A page's raw read: its rows (one more than asked, to tell whether more follow), the total and (on a
#: first page) the rows no page can hold.
PageRows = tuple[list[Any], PendingCount, list[Any]]


@dataclass(frozen=True)
class PendingPage:
    """One page of pending requests, how many are pending in all, and the cursor of the next page."""

    requests: list[dict[str, Any]]
    #: How many are pending in all, counted up to ``pending_count.COUNT_CAP`` (``total_exact`` False past it).
    total: int
    next_cursor: str | None
    #: Stored rows that could not be listed (``{request_id, reason}``), left out of ``requests``.
    skipped: list[dict[str, str]]
    total_exact: bool


#: The largest expiry a page orders by (far past any real one); a bigger or non-numeric one is corrupted.
MAX_EPOCH = 1e300
#: At most this many unorderable rows are reported on a first page.
MAX_SKIPPED_LISTED = 100
#: The pending list's order: urgent first, then the soonest to expire, ties by id.
PENDING_ORDER = (hitl_requests.c.urgent.desc(), hitl_requests.c.expires_epoch, hitl_requests.c.id)


#: The columns a list reads: JSON ones as raw text, parsed per row (baton.store.rows).
LIST_COLUMNS = tuple(
    raw_json(column) if column.name in ("context", "options", "provenance") else column
    for column in hitl_requests.c
)


def pending_query() -> Any:
    """Pending requests in the pending order (the unexpired ones are kept after screening)."""
    return select(*LIST_COLUMNS).where(hitl_requests.c.status == "pending").order_by(*PENDING_ORDER)


def encode_cursor(row: Any) -> str:
    """An opaque cursor naming the position of ``row`` in the pending order."""
    raw = json.dumps([int(bool(row.urgent)), row.expires_epoch, row.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, float, str]:
    """The position a cursor names; a cursor baton did not make is ``invalid_arguments``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        urgent, expires, request_id = json.loads(raw)
        if urgent not in (0, 1) or not isinstance(expires, int | float) or not isinstance(request_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ArgumentError("invalid_arguments", "The cursor is not one this server gave out.") from exc
    return int(urgent), float(expires), request_id


def _after_bound() -> ColumnElement[bool]:
    """Rows after the cursor's position (bound as ``urgent``, ``expires``, ``after_id``) in the pending order."""
    c = hitl_requests.c
    later = or_(
        c.expires_epoch > bindparam("expires"),
        and_(c.expires_epoch == bindparam("expires"), c.id > bindparam("after_id")),
    )
    urgent = bindparam("urgent", type_=Integer)
    return or_(
        and_(urgent == 1, c.urgent.is_(False)),
        and_(cast(c.urgent, Integer) == urgent, later),
    )


#: A pending request (of any agent); the per-agent cap (hitl/creating.py) and the broker's sweep read it too.
PENDING = hitl_requests.c.status == "pending"
#: Rows a page may hold: a real expiry (SQLite keeps a text written into the column, and text sorts after
#: every number, so such a row could not be a page's position); the others are reported on the first page.
#: The column is read as ``+expires_epoch`` (the same value and type): a unary plus keeps SQLite from planning
#: the page on the expiry index, which reads every pending row and sorts them, instead of on the order index.
_PAGEABLE = literal_column("+hitl_requests.expires_epoch", Float) <= bindparam(
    "max_epoch", MAX_EPOCH, type_=Float
)
#: The rows no page can hold, on the plain column: a range read of the expiry index (such rows are rare).
_UNPAGEABLE = hitl_requests.c.expires_epoch > bindparam("max_epoch", MAX_EPOCH, type_=Float)
#: A pending request due to expire (bound as ``now``); the broker's sweep reads it too.
DUE = and_(PENDING, hitl_requests.c.expires_epoch <= bindparam("now"))


@dataclass(frozen=True)
class _PageStatements:
    """The pending list's statements, for every agent's requests or (``agent`` bound) one agent's."""

    first: Prepared
    after: Prepared
    #: One row: ``total`` pending, whether any request (of any agent) is ``due`` to expire, and whether
    #: any row no page can hold exists (``unpageable``): the due check folded into the page's read.
    meta: Prepared
    unpageable: Prepared


def _page_statements(scoped: bool) -> _PageStatements:
    pending = and_(PENDING, hitl_requests.c.agent == bindparam("agent")) if scoped else PENDING
    rows = select(*LIST_COLUMNS).order_by(*PENDING_ORDER).limit(bindparam("limit"))
    unpageable = select(*LIST_COLUMNS).where(pending, _UNPAGEABLE).order_by(hitl_requests.c.id)
    meta = select(
        capped_count(pending).label("total"),
        exists().where(DUE).label("due"),
        exists().where(pending, _UNPAGEABLE).label("unpageable"),
    )
    return _PageStatements(
        Prepared(rows.where(pending, _PAGEABLE)),
        Prepared(rows.where(pending, _PAGEABLE, _after_bound())),
        Prepared(meta),
        Prepared(unpageable.limit(bindparam("skipped_limit"))),
    )


_ALL_AGENTS = _page_statements(False)
_ONE_AGENT = _page_statements(True)


class PageQuery:
    """One page asked for: its parameters (the cursor decoded, ``now`` fixed once) and the statements it runs.

    The statements are built once, at import: building them per call cost more than running them.
    """

    def __init__(self, limit: int, cursor: str | None, agent: str | None, now: float) -> None:
        params: dict[str, Any] = {"now": now, "limit": limit + 1, "skipped_limit": MAX_SKIPPED_LISTED}
        if cursor is not None:
            params["urgent"], params["expires"], params["after_id"] = decode_cursor(cursor)
        if agent is not None:
            params["agent"] = agent
        self.limit = limit
        self.params = params
        self.first = cursor is None
        self.statements = _ALL_AGENTS if agent is None else _ONE_AGENT

    def read(self, store: Store, *, sweep_first: bool) -> PageRows | None:
        """The page's rows, the total and (on a first page) the unpageable rows, read in one transaction (on
        SQLite on the kept driver connection, baton.store.prepared); None when ``sweep_first`` and a request is due to expire."""
        statements, params = self.statements, self.params
        with store.read_prepared() as connection:
            meta: Any = statements.meta.first(connection, **params)  # always one row
            if sweep_first and meta.due:
                return None
            page = statements.after if "after_id" in params else statements.first
            rows = page.all(connection, **params)
            unpageable = (
                statements.unpageable.all(connection, **params) if self.first and meta.unpageable else []
            )
        return rows, PendingCount.read(int(meta.total)), unpageable

    def page(
        self, read: PageRows, with_approvals: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    ) -> PendingPage:
        """The page a read makes: its unexpired views (``approvals`` filled), the skipped rows and the next cursor."""
        rows, total, unpageable = read
        limit = self.limit
        more = len(rows) > limit
        next_cursor = encode_cursor(rows[limit - 1]) if more else None
        listed = list(rows[:limit]) + list(unpageable)
        screened = screen_requests(listed)
        views = with_approvals([view for view in screened.rows if view["expires_epoch"] > self.params["now"]])
        return PendingPage(views, total.total, next_cursor, screened.skipped, total.exact)
