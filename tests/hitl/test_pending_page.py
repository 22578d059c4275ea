"""The pending list and its cursors in-process: what is listed, every request once across small pages,
cursors that are URL-safe, and cursors baton did not make refused with one sentence.

Written for the survivors of the mutation run over ``hitl/broker.py`` (docs/testing.md).
"""

from __future__ import annotations

import base64
import json
import re
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from baton.errors import ArgumentError
from baton.hitl.broker import Decision, HitlBroker, NewRequest
from baton.hitl.pending_page import decode_cursor, encode_cursor
from baton.store.schema import hitl_requests

pytestmark = pytest.mark.anyio

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


async def create_mixed(broker: HitlBroker, count: int) -> list[str]:
    """``count`` pending requests, every third one urgent, each with its own timeout."""
    ids = []
    for index in range(count):
        new = NewRequest("approval", f"request {index}", timeout_seconds=60 + index, urgent=index % 3 == 0)
        ids.append((await broker.create(new))["request_id"])
    return ids


def walk(broker: HitlBroker, size: int) -> tuple[list[str], list[str]]:
    """Every page of ``size``: the request ids in order, and the cursors handed out."""
    seen: list[str] = []
    cursors: list[str] = []
    cursor = None
    while True:
        page = broker.page_pending(size, cursor)
        seen += [view["request_id"] for view in page.requests]
        if page.next_cursor is None:
            return seen, cursors
        cursor = page.next_cursor
        cursors.append(cursor)


async def test_pages_of_one_and_two_walk_urgent_and_plain_requests_in_the_listed_order(
    broker: HitlBroker,
) -> None:
    ids = await create_mixed(broker, 9)
    listed = [view["request_id"] for view in broker.list_pending()]
    assert sorted(listed) == sorted(ids)
    assert listed[:3] == [ids[0], ids[3], ids[6]]  # urgent first, soonest expiry first
    for size in (1, 2):
        seen, cursors = walk(broker, size)
        assert seen == listed
        assert len(cursors) == (len(ids) - 1) // size


async def test_requests_expiring_at_the_same_instant_are_paged_by_id(broker: HitlBroker) -> None:
    """Requests created in the same microsecond with one timeout share ``expires_epoch``; the id breaks it."""
    ids = await create_mixed(broker, 7)
    with broker.runtime.store.write() as connection:
        connection.execute(update(hitl_requests).values(expires_epoch=4e9))
    urgent, plain = sorted(ids[0::3]), sorted(set(ids) - set(ids[0::3]))
    assert [view["request_id"] for view in broker.list_pending()] == urgent + plain
    for size in (1, 2):
        assert walk(broker, size)[0] == urgent + plain


async def test_cursors_are_url_safe_without_padding(broker: HitlBroker) -> None:
    await create_mixed(broker, 7)
    _, cursors = walk(broker, 1)
    assert len(cursors) == 6
    for cursor in cursors:
        assert URL_SAFE.fullmatch(cursor), cursor


async def test_the_pending_list_leaves_out_decided_requests(broker: HitlBroker) -> None:
    ids = await create_mixed(broker, 3)
    broker.respond(ids[1], Decision(approved=True))
    assert [view["request_id"] for view in broker.list_pending()] == [ids[0], ids[2]]
    page = broker.page_pending(10)
    assert ([view["request_id"] for view in page.requests], page.total) == ([ids[0], ids[2]], 2)


def forged(position: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "position",
    [[2, 1.0, "hr_x"], [1, "soon", "hr_x"], [0, 1.0, 5], [1, None, None], "not a list", [1, 1.0]],
)
def test_a_forged_cursor_is_refused_with_one_sentence(position: object) -> None:
    with pytest.raises(ArgumentError) as refused:
        decode_cursor(forged(position))
    assert refused.value.error_class == "invalid_arguments"
    assert str(refused.value) == "The cursor is not one this server gave out."


def test_a_cursor_names_its_position() -> None:
    assert decode_cursor(forged([1, 12.5, "hr_a"])) == (1, 12.5, "hr_a")
    assert decode_cursor(forged([0, 7, "hr_b"])) == (0, 7.0, "hr_b")


def test_cursors_round_trip_whatever_their_length() -> None:
    """Every padding a base64 text can lack (its length mod 4) and more: the cursor is unpadded."""
    for n in range(1, 25):
        row = SimpleNamespace(urgent=n % 2, expires_epoch=1.8e9 + n / 8, id="hr_" + "a" * n)
        cursor = encode_cursor(row)
        assert URL_SAFE.fullmatch(cursor), cursor
        assert decode_cursor(cursor) == (n % 2, 1.8e9 + n / 8, row.id)
