"""The campaign runner's notification preflights over stdio through the official MCP client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import WebhookReceiver
from tests.cli_process import run_cli
from tests.conftest import call, server_parameters
from tests.notify_support import (
    SLACK_PATH,
    SMTP_PASSWORD,
    SMTP_USERNAME,
    TELEGRAM_TOKEN,
    assert_no_secret,
    configured_env,
    open_runtime,
    secret_values,
)

pytestmark = pytest.mark.anyio

NOTIFY_TOOLS = {
    "mcp_send_email",
    "mcp_send_telegram_message",
    "mcp_send_slack_message",
    "mcp_send_discord_message",
    "mcp_send_webhook",
    "mcp_notification_channels",
}


@asynccontextmanager
async def session_logging_to(env: dict[str, str], log_path: Path) -> AsyncIterator[ClientSession]:
    """Like conftest.stdio_session, with the server's stderr kept in ``log_path`` for scanning."""
    with log_path.open("w") as errlog:
        async with (
            stdio_client(server_parameters(env), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def preflights(session: ClientSession) -> dict[str, dict[str, Any]]:
    """The three calls exactly as the reference campaign runner makes them without real notifications."""
    return {
        "email": await call(
            session,
            "mcp_send_email",
            {
                "to_email": "nobody@example.invalid",
                "subject": "Experiment 4-4",
                "body": "Credential preflight only",
            },
        ),
        "telegram": await call(
            session,
            "mcp_send_telegram_message",
            {"message": "Experiment 4-4 credential preflight", "parse_mode": "HTML", "chat_id": "0"},
        ),
        "slack": await call(
            session, "mcp_send_slack_message", {"message": "Experiment 4-4 credential preflight"}
        ),
    }


async def test_preflights_answer_not_configured_when_nothing_is_configured(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    async with session_logging_to(baton_env, tmp_path / "server.log") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names >= NOTIFY_TOOLS
        results = await preflights(session)
        channels = await call(session, "mcp_notification_channels")
    for result in results.values():
        assert result["success"] is False
        assert result["error_class"] == "notification_not_configured"
        assert result["error"]
    assert results["email"]["missing"] == ["SMTP_HOST", "SMTP_FROM_EMAIL"]
    assert results["telegram"]["missing"] == ["TELEGRAM_BOT_TOKEN"]
    assert results["slack"]["missing"] == ["SLACK_WEBHOOK_URL"]
    assert channels["success"] is True and channels["ready"] == []
    runtime = open_runtime(baton_env)
    try:
        receipts = [r.payload for r in runtime.receipts.list(kind="notification")]
    finally:
        runtime.close()
    assert [(r["channel"], r["outcome"], r["attempts"]) for r in receipts] == [
        ("email", "not_configured", 0),
        ("telegram", "not_configured", 0),
        ("slack", "not_configured", 0),
    ]
    assert {row["channel"] for row in channels["channels"]} == {
        "email",
        "telegram",
        "slack",
        "discord",
        "webhook",
    }


async def test_preflights_succeed_against_loopback_servers_without_leaking_secrets(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    with SMTPReceiver(username=SMTP_USERNAME, password=SMTP_PASSWORD) as smtp, WebhookReceiver() as web:
        env = {**baton_env, **configured_env(smtp, web, tmp_path / "home")}
        log_path = tmp_path / "server.log"
        async with session_logging_to(env, log_path) as session:
            results = await preflights(session)
            channels = await call(session, "mcp_notification_channels")
            bad = await call(session, "mcp_send_webhook", {"payload": {"a": 1}, "url": "file:///etc/passwd"})
        (mail,) = smtp.wait_for(1)
        posts = {r.path: r.json for r in web.wait_for(2)}
    assert all(r["success"] is True for r in results.values()), results
    assert [results[c]["channel"] for c in ("email", "telegram", "slack")] == ["email", "telegram", "slack"]
    assert results["email"]["provider"] == "smtp" and results["email"]["recipient"] == "n***@example.invalid"
    assert mail.rcpt_tos == ["nobody@example.invalid"] and mail.message["Subject"] == "Experiment 4-4"
    assert mail.login == SMTP_USERNAME
    assert posts[f"/telegram/bot{TELEGRAM_TOKEN}/sendMessage"] == {
        "chat_id": "0",
        "text": "Experiment 4-4 credential preflight",
        "parse_mode": "HTML",
    }
    assert posts[SLACK_PATH] == {"text": "Experiment 4-4 credential preflight"}
    assert len(channels["ready"]) == 5
    assert bad["success"] is False and bad["error_class"] == "invalid_arguments"

    secrets = secret_values(env)
    assert_no_secret("results", [results, channels, bad], secrets)
    assert_no_secret("server log", log_path.read_text(), secrets)
    runtime = open_runtime(env)
    try:
        receipts = [r.model_dump() for r in runtime.receipts.list(limit=1000)]
        assert runtime.receipts.verify().ok
    finally:
        runtime.close()
    assert [r["payload"]["channel"] for r in receipts if r["kind"] == "notification"] == [
        "email",
        "telegram",
        "slack",
    ]
    assert_no_secret("receipts", receipts, secrets)


def test_doctor_prints_channel_readiness_without_secrets(baton_env: dict[str, str], tmp_path: Path) -> None:
    with SMTPReceiver() as smtp, WebhookReceiver() as web:
        env = {**baton_env, **configured_env(smtp, web, tmp_path / "home")}
    doctor = run_cli(env, "doctor", "--json")
    rows = {row["name"]: row for row in json.loads(doctor.stdout)}
    assert all(rows[f"notify: {c}"]["ok"] for c in ("email", "telegram", "slack", "discord", "webhook"))
    assert "SMTP 127.0.0.1" in rows["notify: email"]["detail"]
    assert_no_secret("doctor", doctor.stdout + doctor.stderr, secret_values(env))


async def test_outbound_slack_discord_and_telegram_text_is_redacted_on_the_wire(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    """A configured secret or a credential-shaped string in a message never leaves the machine."""
    with SMTPReceiver(username=SMTP_USERNAME, password=SMTP_PASSWORD) as smtp, WebhookReceiver() as web:
        env = {**baton_env, **configured_env(smtp, web, tmp_path / "home")}
        shaped = "sk-" + "live0123456789abcdefXYZ"
        message = f"the SMTP password is {SMTP_PASSWORD}, the key {shaped}"
        async with session_logging_to(env, tmp_path / "server.log") as session:
            for tool in ("mcp_send_slack_message", "mcp_send_discord_message", "mcp_send_telegram_message"):
                sent = await call(session, tool, {"message": message})
                assert sent["success"] is True, (tool, sent)
        posts = web.wait_for(3)
    assert len(posts) == 3
    for post in posts:
        body = post.raw.decode()
        assert SMTP_PASSWORD not in body and shaped not in body, (post.path, body)
        assert body.count("[REDACTED]") == 2, (post.path, body)
