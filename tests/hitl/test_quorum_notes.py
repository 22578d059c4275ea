"""Every approver's notes of a quorum are kept, receipted and returned to the agent: a real
``baton serve --http``, the agent over MCP, one approver through the CLI process and one with the
operator's token over HTTP."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from tests.cli_process import run_cli
from tests.conftest import call
from tests.console.test_console_truth import _shoot
from tests.hitl.helpers import pending_requests
from tests.hitl.test_decide_pages_browser import _keep
from tests.hitl.test_people_browser import ADMIN_TOKEN, AGENT_TOKEN, _agent, _ask, _settled

pytestmark = pytest.mark.anyio


def _operator_decides(base_url: str, request_id: str, action: str, notes: str) -> httpx.Response:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        return client.post(
            f"/inbox/requests/{request_id}/decide",
            data={"action": action, "admin_notes": notes},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Origin": base_url},
        )


@pytest.mark.needs("chromium")
async def test_a_quorum_returns_and_receipts_the_notes_of_every_approver(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    me = getpass.getuser()
    async with _agent(server.base_url) as session:
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, result, request_message="Rotate", required_approvals=2))
            request_id = (await pending_requests(session))[0]["request_id"]
            first = await anyio.to_thread.run_sync(
                run_cli, env, "hitl", "approve", request_id, "--notes", "Checked the key list."
            )
            assert first.returncode == 0, first.stderr
            second = await anyio.to_thread.run_sync(
                _operator_decides, server.base_url, request_id, "approve", "Rotation window is open."
            )
            assert second.status_code == 303, second.text
            outcome = await _settled(result)
        status = await call(session, "mcp_get_request_status", {"request_id": request_id})
    expected = [
        {"by": me, "notes": "Checked the key list."},
        {"by": "operator", "notes": "Rotation window is open."},
    ]
    assert outcome["approved"] is True
    assert outcome["admin_notes"] == f"{me}: Checked the key list.\noperator: Rotation window is open."
    assert status["admin_notes"] == outcome["admin_notes"]
    runtime = Runtime.open(load_settings(env))
    try:
        partial = [r.payload for r in runtime.receipts.list(kind="hitl_partial_approval")]
        decided = [r.payload for r in runtime.receipts.list(kind="hitl_decided")]
    finally:
        runtime.close()
    assert partial[-1]["admin_notes"] == "Checked the key list."
    assert decided[-1]["notes"] == expected
    assert decided[-1]["admin_notes"] == outcome["admin_notes"]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        shown = await client.get(
            f"/inbox/requests/{request_id}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
    page = shown.text
    assert "<li><b>operator</b>: Rotation window is open.</li>" in page
    await _shoot(server.base_url, f"/inbox/requests/{request_id}", "quorum-notes", tmp_path, ADMIN_TOKEN)
    _keep(tmp_path)


async def test_a_rejection_after_an_approval_keeps_the_approvers_notes_too(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    server = http_server_factory(env)
    me = getpass.getuser()
    async with _agent(server.base_url) as session:
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _ask(session, result, request_message="Drop", required_approvals=2))
            request_id = (await pending_requests(session))[0]["request_id"]
            first = await anyio.to_thread.run_sync(
                run_cli, env, "hitl", "approve", request_id, "--notes", "Fine by me."
            )
            assert first.returncode == 0, first.stderr
            second = await anyio.to_thread.run_sync(
                _operator_decides, server.base_url, request_id, "reject", "Not during the freeze."
            )
            assert second.status_code == 303, second.text
            outcome = await _settled(result)
    assert outcome["approved"] is False
    assert outcome["admin_notes"] == f"{me}: Fine by me.\noperator: Not during the freeze."
    runtime = Runtime.open(load_settings(env))
    try:
        decided = [r.payload for r in runtime.receipts.list(kind="hitl_decided")]
    finally:
        runtime.close()
    assert decided[-1]["notes"] == [
        {"by": me, "notes": "Fine by me."},
        {"by": "operator", "notes": "Not during the freeze."},
    ]
