"""Escalation steps and reminders through real `baton serve` processes, the official MCP client and a loopback
webhook receiver: a step fires once and is receipted, a reminder comes before expiry, a closed request's step
never fires, steps survive a restart, two servers on one store fire each step once."""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from datetime import datetime
from typing import Any

import anyio
import pytest

from baton.config import load_settings
from baton.hitl.broker import get_broker
from baton.hitl.records import Decision, NewRequest
from baton.runtime import Runtime
from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import WebhookReceiver
from tests.cli_process import run_cli
from tests.conftest import call, stdio_session
from tests.hitl.helpers import pending_requests

pytestmark = pytest.mark.anyio

#: Long enough that no request in these tests expires while it matters (each is decided or abandoned).
LONG = 3600
SECRET_PATH = "/hooks/escalation-secret-path-31"


@pytest.fixture
def receiver() -> Any:
    """A loopback webhook receiver (HITL_WEBHOOK_URL and people's webhook destinations point at it)."""
    with WebhookReceiver() as web:
        yield web


@pytest.fixture
def env(baton_env: dict[str, str], receiver: WebhookReceiver) -> dict[str, str]:
    """The webhook channel configured against the receiver; fast, bounded delivery."""
    return {
        **baton_env,
        "HITL_WEBHOOK_URL": receiver.url(SECRET_PATH),
        "BATON_WEBHOOK_ALLOW": "127.0.0.0/8",
        "BATON_NOTIFY_TIMEOUT_SECONDS": "5",
        "BATON_NOTIFY_ATTEMPTS": "2",
        "BATON_NOTIFY_BACKOFF_SECONDS": "0.05",
    }


def receipts(env: dict[str, str], kind: str) -> list[dict[str, Any]]:
    """The payloads of every receipt of ``kind``, oldest first, read with ``baton receipts list --json``."""
    done = run_cli(env, "receipts", "list", "--oldest", "--kind", kind, "--limit", "10000", "--json")
    assert done.returncode == 0, done.stderr
    return [row["payload"] for row in json.loads(done.stdout)]


def steps_received(receiver: WebhookReceiver, event: str) -> list[dict[str, Any]]:
    """The step notifications (``event``: hitl_escalation or hitl_reminder) the receiver got."""
    return [
        r.json for r in list(receiver.requests) if isinstance(r.json, dict) and r.json.get("event") == event
    ]


async def until_receipts(env: dict[str, str], kind: str, count: int) -> list[dict[str, Any]]:
    """Wait until ``count`` receipts of ``kind`` exist (the guard only stops a hang)."""
    with anyio.fail_after(120):
        while len(found := receipts(env, kind)) < count:
            await anyio.sleep(0.1)
    return found


async def until_received(receiver: WebhookReceiver, event: str, count: int) -> list[dict[str, Any]]:
    """Wait until the receiver got ``count`` notifications of ``event`` (the guard only stops a hang)."""
    with anyio.fail_after(120):
        while len(found := steps_received(receiver, event)) < count:
            await anyio.sleep(0.05)
    return found


async def test_a_step_notifies_the_next_channel_and_is_receipted_and_a_failed_one_denies_nothing(
    env: dict[str, str], receiver: WebhookReceiver
) -> None:
    """Step 1 names Slack, which is not configured: its receipt carries the error class. Step 2 reaches the
    webhook receiver. Neither decides: the request stays pending until a person approves it."""
    outcome: list[dict[str, Any]] = []
    async with stdio_session(env) as session:

        async def ask() -> None:
            args = {
                "request_message": "Rotate the keys?",
                "timeout_seconds": LONG,
                "escalation": "1:slack,2:webhook",
            }
            outcome.append(await call(session, "mcp_request_admin_approval", args))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            (request,) = await pending_requests(session)
            request_id = request["request_id"]
            (received,) = await until_received(receiver, "hitl_escalation", 1)
            escalated = await until_receipts(env, "hitl_escalated", 2)
            status = await call(session, "mcp_get_request_status", {"request_id": request_id})
            assert status["status"] == "pending" and status["approved"] is False
            done = run_cli(env, "hitl", "approve", request_id, "--notes", "after escalation")
            assert done.returncode == 0, done.stderr
    assert outcome[0]["success"] is True and outcome[0]["approved"] is True, outcome
    assert received["request"]["request_id"] == request_id
    assert received["step"] == {"step": 2, "steps": 2, "type": "escalate", "to": "webhook"}
    failed, delivered = sorted(escalated, key=lambda r: r["step"])
    assert failed["request_id"] == request_id and failed["to"] == "slack" and failed["source"] == "request"
    assert failed["delivered"] is False and failed["error_class"] == "notification_not_configured"
    assert delivered["delivered"] is True and delivered["error_class"] is None
    assert (
        delivered["deliveries"][0]["channel"] == "webhook" and delivered["deliveries"][0]["success"] is True
    )
    assert datetime.fromisoformat(delivered["fired_at"]) < datetime.fromisoformat(status["expires_at"])
    # the webhook's secret path is a credential: receipts name its host only
    assert SECRET_PATH not in json.dumps(escalated)
    (requested,) = receipts(env, "hitl_requested")
    assert [(s["step"], s["kind"], s["to"]) for s in requested["escalation"]] == [
        (1, "escalate", "slack"),
        (2, "escalate", "webhook"),
    ]


async def test_the_operators_reminder_reaches_a_person_before_the_request_expires(
    env: dict[str, str],
) -> None:
    """BATON_HITL_ESCALATION names a reminder 3599 s before a 3600 s request expires, to a person whose
    notify destination is an address on a loopback SMTP server; it arrives while the request is pending,
    before its expiry, and names the request."""
    added = run_cli(env, "people", "add", "ada", "--notify", "email:ada@example.org")
    assert added.returncode == 0, added.stderr
    refused = run_cli(env, "people", "notify", "ada", "webhook:http://127.0.0.1:9/x")
    assert refused.returncode == 1 and "invalid_arguments" in refused.stderr
    listed = run_cli(env, "people", "list", "--json")
    assert json.loads(listed.stdout)[0]["notify"] == "email a***@example.org"
    with SMTPReceiver() as smtp:
        server_env = {
            **env,
            "SMTP_HOST": smtp.host,
            "SMTP_PORT": str(smtp.port),
            "SMTP_FROM_EMAIL": "baton@example.org",
            "BATON_SMTP_SECURITY": "none",
            "BATON_HITL_ESCALATION": "remind:3599:person:ada",
        }
        async with stdio_session(server_env) as session:
            args = {"question": "Which region?", "timeout_seconds": LONG, "options": ["eu", "us"]}
            async with anyio.create_task_group() as group:
                group.start_soon(call, session, "mcp_request_admin_input", args)
                (request,) = await pending_requests(session)
                (receipt,) = await until_receipts(env, "hitl_reminded", 1)
                status = await call(session, "mcp_get_request_status", {"request_id": request["request_id"]})
                assert status["status"] == "pending"
                group.cancel_scope.cancel()
        (mail,) = [m for m in smtp.messages if "ada@example.org" in m.rcpt_tos]
    assert str(mail.message["Subject"]).startswith("[baton] Reminder: input request expires in ")
    assert request["request_id"] in mail.text() and "denied" in mail.text()
    assert receipt["request_id"] == request["request_id"] and receipt["source"] == "operator"
    assert receipt["to"] == "person:ada" and receipt["delivered"] is True
    assert receipt["deliveries"][0]["recipient"] == "a***@example.org"
    assert "ada@example.org" not in json.dumps(receipt)
    assert datetime.fromisoformat(receipt["fired_at"]) < datetime.fromisoformat(request["expires_at"])


async def test_a_closed_requests_step_never_fires_and_an_open_ones_fires_after_a_restart(
    env: dict[str, str], receiver: WebhookReceiver
) -> None:
    """With no server running: A is decided before its step is due, C expires before its step fires, D
    stays open. All three steps fall due while no server runs. The server started next fires D's step
    (missed) and never A's or C's; steps are claimed in due order and D's is due last, so once D's fired,
    A's and C's were due and were seen."""
    runtime = Runtime.open(load_settings(env))
    try:
        broker = get_broker(runtime)
        decided = await broker.create(
            NewRequest("approval", "A: decided", None, LONG, escalation="1:webhook")
        )
        broker.respond(decided["request_id"], Decision(approved=False, via="cli", decided_by="cli"))
        expiring = await broker.create(NewRequest("approval", "C: expires", None, 2, escalation="1:webhook"))
        kept = await broker.create(
            NewRequest("approval", "D: stays open", None, LONG, escalation="1:webhook")
        )
    finally:
        runtime.close()
    # wait for the moment D's step is due and C has expired (a point in time, not a margin)
    await anyio.sleep(
        max(0.0, max(kept["expires_epoch"] - LONG + 1, expiring["expires_epoch"]) - time.time())
    )
    timers = {t["name"]: t for t in json.loads(run_cli(env, "timers", "list", "--json").stdout)}
    assert timers[f"{decided['request_id']} escalation 1"]["status"] == "cancelled"
    assert receipts(env, "hitl_escalated") == [] and steps_received(receiver, "hitl_escalation") == []

    async with stdio_session(env) as session:
        (received,) = await until_received(receiver, "hitl_escalation", 1)
        (fired,) = await until_receipts(env, "hitl_escalated", 1)
        assert (await call(session, "mcp_list_timers"))["success"] is True  # the server answers meanwhile
    shown = run_cli(env, "hitl", "show", kept["request_id"], "--json")
    assert json.loads(shown.stdout)["status"] == "pending", shown.stdout
    assert received["request"]["request_id"] == kept["request_id"]
    assert (
        fired["request_id"] == kept["request_id"] and fired["missed"] is True and fired["delivered"] is True
    )
    timers = {t["name"]: t for t in json.loads(run_cli(env, "timers", "list", "--json").stdout)}
    assert timers[f"{decided['request_id']} escalation 1"]["status"] == "cancelled"
    assert timers[f"{expiring['request_id']} escalation 1"]["status"] == "cancelled"
    assert timers[f"{expiring['request_id']} escalation 1"]["fire_count"] == 0
    assert timers[f"{kept['request_id']} escalation 1"]["status"] == "completed"
    assert [r["request_id"] for r in receipts(env, "hitl_escalated")] == [kept["request_id"]]


async def test_two_servers_on_one_store_fire_each_step_once(
    env: dict[str, str], receiver: WebhookReceiver
) -> None:
    """Both servers scan the store; each step is claimed by one. The third step is the marker: once it
    fired, the first two had been due for a second or more, long past any duplicate's chance."""
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(stdio_session(env))
        second = await stack.enter_async_context(stdio_session(env))
        args = {
            "request_message": "Shared store?",
            "timeout_seconds": LONG,
            "escalation": "1:webhook,1:webhook,3:webhook",
        }
        async with anyio.create_task_group() as group:
            group.start_soon(call, first, "mcp_request_admin_approval", args)
            (request,) = await pending_requests(second)
            with anyio.fail_after(120):
                while not any(r["step"] == 3 for r in receipts(env, "hitl_escalated")):
                    await anyio.sleep(0.1)
            group.cancel_scope.cancel()
    fired = receipts(env, "hitl_escalated")
    assert sorted(r["step"] for r in fired) == [1, 2, 3]
    assert {r["request_id"] for r in fired} == {request["request_id"]}
    assert sorted(r["step"]["step"] for r in steps_received(receiver, "hitl_escalation")) == [1, 2, 3]


async def test_bad_steps_are_refused_with_a_typed_error(env: dict[str, str]) -> None:
    async with stdio_session(env) as session:
        for escalation, error_class in (
            ("600:sms", "invalid_arguments"),
            ("60:slack", "invalid_arguments"),  # at the 60 s timeout: it could never fire
            ("remind:60", "invalid_arguments"),
        ):
            args = {"request_message": "x", "timeout_seconds": 60, "escalation": escalation}
            result = await call(session, "mcp_request_admin_approval", args)
            assert result["success"] is False and result["error_class"] == error_class, (escalation, result)
        assert (await call(session, "mcp_list_pending_requests"))["total"] == 0
        # an agent cannot make a step timer of its own (the kind is the broker's)
        step = {"kind": "hitl_step", "request_id": "hr_0", "type": "escalate", "to": "slack"}
        timer = await call(session, "mcp_set_timer", {"name": "sneaky", "delay_seconds": 1, "action": step})
        assert timer["success"] is False and timer["error_class"] == "timer_action_invalid"
    doctor = run_cli(
        {**env, "BATON_HITL_ESCALATION": "600:webhook,900:slack,remind:60:person:nobody"}, "doctor", "--json"
    )
    (check,) = [row for row in json.loads(doctor.stdout) if row["name"] == "hitl escalation"]
    assert check["ok"] is False, check
    assert check["detail"].endswith("unreachable: slack (not configured), person:nobody (person_not_found)")
    bad = run_cli({**env, "BATON_HITL_ESCALATION": "600:slack,soon:email"}, "doctor", "--json")
    assert bad.returncode != 0 and "config_invalid" in bad.stdout + bad.stderr
    assert "BATON_HITL_ESCALATION" in bad.stdout + bad.stderr


async def test_every_step_to_one_target_carries_its_one_live_link_and_an_unknown_person_looks_like_one_without_a_destination(
    env: dict[str, str], receiver: WebhookReceiver
) -> None:
    env = {**env, "BATON_PUBLIC_URL": "http://127.0.0.1:9"}  # links are minted; none is followed here
    assert run_cli(env, "people", "add", "ada").returncode == 0  # registered, with no notify destination
    async with stdio_session(env) as session:
        args = {
            "request_message": "Rotate the keys?",
            "timeout_seconds": LONG,
            "escalation": "1:webhook,1:person:ada,1:person:nobody-here,2:webhook",
        }
        async with anyio.create_task_group() as group:
            group.start_soon(call, session, "mcp_request_admin_approval", args)
            (request,) = await pending_requests(session)
            received = await until_received(receiver, "hitl_escalation", 2)
            escalated = await until_receipts(env, "hitl_escalated", 4)
            assert run_cli(env, "hitl", "reject", request["request_id"]).returncode == 0
    assert len({step["link"] for step in received}) == 1 and received[0]["link"].startswith(
        "http://127.0.0.1:9/"
    )
    by_person = {r["to"]: r["deliveries"][0] for r in escalated if r["to"].startswith("person:")}
    ada, nobody = by_person["person:ada"], by_person["person:nobody-here"]
    assert {**ada, "to": "X"} == {**nobody, "to": "X"}  # the same answer: nobody learns who is registered
    assert ada["error_class"] == "notification_not_configured" and "ada" not in ada["error"]
