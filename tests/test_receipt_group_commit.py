"""Group commit of receipts (``baton serve --http``): concurrent calls' tool-call receipts are chained in
order, committed before each answer, and a payload the credential guard refuses fails alone.

The first test drives a real ``baton serve --http`` on 127.0.0.1 with many official clients at once; the
others append on a real store of each database through ``ReceiptLog.append_many`` / ``append_soon``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from baton.errors import ReceiptError
from baton.evidence.canonical import canonical_json, sha256_hex
from baton.evidence.receipts import Receipt, ReceiptLog, Redactor
from baton.store.engine import Store
from tests.cli_process import run_cli
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

#: A configured secret no single string holds: redaction leaves it, the guard on the whole text refuses it.
SPANNING = 'k":1,"zz'
REFUSED = {"k": 1, "zz": 2}
CLIENTS = 16
CALLS_EACH = 6


def tool_call_receipts(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every ``tool_call`` receipt, oldest first, through ``baton receipts list``."""
    done = run_cli(env, "receipts", "list", "--kind", "tool_call", "--limit", "1000", "--oldest", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


async def test_concurrent_http_calls_each_answer_after_their_own_receipt_and_the_chain_verifies(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    answered: list[str] = []  # arguments digests of the calls answered so far
    seen_before_answer: list[bool] = []

    async def client(index: int) -> None:
        async with (
            httpx.AsyncClient(timeout=3600) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as mcp,
        ):
            for call in range(CALLS_EACH):
                arguments = {"message": f"client {index} call {call}"}
                result = await mcp.call_tool("mcp_ping", arguments)
                assert isinstance(result.structured_content, dict)
                assert result.structured_content["success"] is True
                answered.append(sha256_hex(canonical_json(arguments)))

    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        async with anyio.create_task_group() as group:
            for index in range(CLIENTS):
                group.start_soon(client, index)
        # every answered call's receipt is in the store while the server still runs
        stored = await anyio.to_thread.run_sync(tool_call_receipts, baton_env)
        digests = [
            row["payload"]["arguments_sha256"] for row in stored if row["payload"]["tool"] == "mcp_ping"
        ]
        seen_before_answer.extend(digest in digests for digest in answered)
    assert len(answered) == CLIENTS * CALLS_EACH
    assert all(seen_before_answer)
    assert sorted(digests) == sorted(answered)  # one receipt per call, none twice
    seqs = [row["seq"] for row in stored]
    assert seqs == sorted(seqs)
    verified = run_cli(baton_env, "receipts", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_batch_is_chained_in_order_and_a_refused_payload_fails_alone(database_url: str) -> None:
    log = ReceiptLog(Store(database_url), Redactor((SPANNING,)))
    first = log.append("before", {"n": 0})
    outcomes = log.append_many([("batch", {"n": 1}), ("batch", REFUSED), ("batch", {"n": 3})])
    assert isinstance(outcomes[0], Receipt) and isinstance(outcomes[2], Receipt)
    assert isinstance(outcomes[1], ReceiptError)
    assert outcomes[1].error_class == "receipt_contains_secret"
    assert [outcomes[0].seq, outcomes[2].seq] == [2, 3]
    assert outcomes[0].prev_sha256 == first.sha256 and outcomes[2].prev_sha256 == outcomes[0].sha256
    assert [r.payload for r in log.list()] == [{"n": 0}, {"n": 1}, {"n": 3}]
    after = log.append("after", {"n": 4})
    assert (after.seq, after.prev_sha256) == (4, outcomes[2].sha256)
    assert log.verify().ok
    log.store.dispose()


def test_a_batch_of_only_refused_payloads_writes_nothing(tmp_path: Path) -> None:
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor((SPANNING,)))
    (outcome,) = log.append_many([("batch", REFUSED)])
    assert isinstance(outcome, ReceiptError)
    assert log.list() == []
    log.store.dispose()


async def test_append_soon_groups_concurrent_appends_and_each_returns_its_own_committed_receipt(
    tmp_path: Path,
) -> None:
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor((SPANNING,)))
    log.group_commit = True
    log.in_flight = 40  # as the HTTP server counts its requests (baton.http.inflight)
    made: dict[int, Receipt] = {}
    refused: list[str] = []

    async def append(n: int) -> None:
        payload: dict[str, Any] = {"n": n} if n != 7 else REFUSED
        try:
            made[n] = await log.append_soon("soon", payload)
        except ReceiptError as exc:
            refused.append(exc.error_class)

    async with anyio.create_task_group() as group:
        for n in range(40):
            group.start_soon(append, n)
    assert refused == ["receipt_contains_secret"]
    assert sorted(made) == [n for n in range(40) if n != 7]
    stored = {r.seq: r for r in log.list()}
    assert sorted(stored) == list(range(1, 40))
    for receipt in made.values():
        assert stored[receipt.seq] == receipt  # what each caller got is what was committed
    assert log.verify().ok
    log.store.dispose()


async def test_a_lone_request_commits_at_once_and_one_made_while_others_are_queued_keeps_their_order(
    tmp_path: Path,
) -> None:
    log = ReceiptLog(Store(f"sqlite:///{tmp_path / 'r.db'}"), Redactor())
    log.group_commit = True
    # the only request in flight, nothing queued: committed inline, before any other task has run
    log.in_flight = 1
    ran_meanwhile: list[str] = []

    async def other() -> None:
        ran_meanwhile.append("other")

    async with anyio.create_task_group() as group:
        group.start_soon(other)
        lone = await log.append_soon("lone", {"n": 0})
        assert ran_meanwhile == []  # no thread hop, no yield to the loop: the receipt was written inline
    assert [r.seq for r in log.list()] == [lone.seq] == [1]

    # appends of concurrent requests are queued; one made alone while they are queued joins the queue
    # behind them, so the chain keeps the order the calls finished in
    made: dict[int, Receipt] = {}

    async def append(n: int) -> None:
        made[n] = await log.append_soon("soon", {"n": n})

    async with anyio.create_task_group() as group:
        log.in_flight = 5
        for n in range(1, 6):
            group.start_soon(append, n)
        await anyio.lowlevel.checkpoint()  # the five are queued (their committer has started)
        log.in_flight = 1
        group.start_soon(append, 6)
    stored = [r.payload["n"] for r in log.list()]
    assert stored == [0, 1, 2, 3, 4, 5, 6]
    assert all(made[n].payload == {"n": n} for n in made)
    assert log.verify().ok
    log.store.dispose()
