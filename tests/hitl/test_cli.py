"""``baton hitl`` in its own process against the store a runtime in this process also uses."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest

from baton.config import load_settings
from baton.hitl.broker import HitlBroker, NewRequest, get_broker
from baton.identity.links import LinkSigner
from baton.runtime import Runtime
from tests.cli_process import run_cli

pytestmark = pytest.mark.anyio


async def test_watch_answer_and_link(baton_env: dict[str, str], broker: HitlBroker, runtime: Runtime) -> None:
    question = await broker.create(
        NewRequest("input", "Which colour?", timeout_seconds=3600, options=["red", "blue"])
    )
    approval = await broker.create(NewRequest("approval", "Go?", timeout_seconds=3600, urgent=True))
    watched = await anyio.to_thread.run_sync(
        run_cli, baton_env, "hitl", "watch", "--max-seconds", "0.5", "--interval", "0.1"
    )
    assert watched.returncode == 0 and "URGENT" in watched.stdout and question["request_id"] in watched.stdout
    listed = json.loads((await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "list", "--json")).stdout)
    assert [row["request_id"] for row in listed] == [approval["request_id"], question["request_id"]]

    wrong = await anyio.to_thread.run_sync(
        run_cli, baton_env, "hitl", "answer", question["request_id"], "green"
    )
    assert wrong.returncode == 1 and "hitl_response_invalid" in wrong.stderr
    answered = await anyio.to_thread.run_sync(
        run_cli, baton_env, "hitl", "answer", question["request_id"], "blue"
    )
    assert answered.returncode == 0 and broker.get(question["request_id"])["response"] == "blue"

    printed = await anyio.to_thread.run_sync(
        run_cli, baton_env, "hitl", "link", approval["request_id"], "--base-url", "http://127.0.0.1:8765"
    )
    assert printed.returncode == 0, printed.stderr
    query = {k: v[0] for k, v in parse_qs(urlsplit(printed.stdout.strip()).query).items()}
    claim = LinkSigner.for_runtime(runtime).verify_link(query["r"], query["e"], query["n"], query["s"])
    assert claim.request_id == approval["request_id"]


async def test_show_prints_one_request_whole_and_refuses_an_unknown_id(
    baton_env: dict[str, str], broker: HitlBroker
) -> None:
    message = "Run these?\nDELETE FROM sessions;\nVACUUM;"
    asked = await broker.create(
        NewRequest("approval", message, timeout_seconds=3600, context={"table": "sessions", "rows": 1200})
    )
    request_id = asked["request_id"]
    shown = json.loads(
        (await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id, "--json")).stdout
    )
    assert shown["request_id"] == request_id and shown["message"] == message
    assert shown["context"] == {"table": "sessions", "rows": 1200} and shown["status"] == "pending"
    table = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id)
    assert table.returncode == 0 and request_id in table.stdout and "DELETE FROM sessions;" in table.stdout
    assert '"rows": 1200' in table.stdout
    await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "approve", request_id, "--notes", "fine")
    decided = json.loads(
        (await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id, "--json")).stdout
    )
    assert (
        decided["status"] == "approved"
        and decided["decided_via"] == "cli"
        and decided["admin_notes"] == "fine"
    )
    unknown = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", "hr_unknown")
    assert unknown.returncode == 1 and unknown.stderr.startswith("hitl_request_not_found: ")
    assert "Traceback" not in unknown.stderr and unknown.stdout == ""


async def test_link_refuses_to_print_a_link_the_server_would_reject(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    served_env = {**baton_env, "BATON_ADMIN_TOKEN": "operator-token-for-links-0123456789"}
    server = http_server_factory(served_env)
    runtime = Runtime.open(load_settings(served_env))
    try:
        asked = await get_broker(runtime).create(NewRequest("approval", "Link me", timeout_seconds=3600))
    finally:
        runtime.close()
    request_id = asked["request_id"]
    wrong = await anyio.to_thread.run_sync(
        run_cli, baton_env, "hitl", "link", request_id, "--base-url", server.base_url
    )
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert wrong.stderr.startswith("hitl_link_invalid: The server on this home signs links with other tokens")
    right = await anyio.to_thread.run_sync(
        run_cli, served_env, "hitl", "link", request_id, "--base-url", server.base_url
    )
    assert right.returncode == 0, right.stderr
    async with httpx.AsyncClient(timeout=30) as client:
        opened = await client.get(right.stdout.strip())
    assert opened.status_code == 200 and "Link me" in opened.text
