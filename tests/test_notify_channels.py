"""Notification channels against real loopback peers: an aiosmtpd server and an HTTP webhook receiver."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton.errors import BatonError
from baton.notify.service import Notifier
from baton.runtime import Runtime
from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import SilentServer, WebhookReceiver
from tests.notify_support import (
    ADMIN_EMAIL,
    DELIVERY,
    DISCORD_PATH,
    HITL_PATH,
    SENDGRID_KEY,
    SLACK_PATH,
    SMTP_FROM,
    SMTP_PASSWORD,
    SMTP_USERNAME,
    TELEGRAM_TOKEN,
    assert_no_secret,
    configured_env,
    open_runtime,
    secret_values,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def smtp() -> Iterator[SMTPReceiver]:
    with SMTPReceiver(username=SMTP_USERNAME, password=SMTP_PASSWORD) as server:
        yield server


@pytest.fixture
def web() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture
def env(smtp: SMTPReceiver, web: WebhookReceiver, tmp_path: Path) -> dict[str, str]:
    return configured_env(smtp, web, tmp_path / "home")


@pytest.fixture
def runtime(env: dict[str, str]) -> Iterator[Runtime]:
    rt = open_runtime(env)
    yield rt
    rt.close()


async def failure(coro: object) -> BatonError:
    """The BatonError an awaited send raises."""
    with pytest.raises(BatonError) as caught:
        await coro  # type: ignore[misc]
    return caught.value


def notification_receipts(runtime: Runtime) -> list[dict[str, object]]:
    return [r.payload for r in runtime.receipts.list(kind="notification")]


async def test_email_reaches_the_smtp_server_with_login_headers_and_body(
    runtime: Runtime, smtp: SMTPReceiver, env: dict[str, str]
) -> None:
    result = await Notifier(runtime).send_email("ada@example.com", "Refund decision", "Line one\nLine two")
    assert result["channel"] == "email" and result["provider"] == "smtp"
    assert result["recipient"] == "a***@example.com" and result["attempts"] == 1
    (mail,) = smtp.wait_for(1)
    assert mail.login == SMTP_USERNAME
    assert mail.mail_from == SMTP_FROM and mail.rcpt_tos == ["ada@example.com"]
    assert mail.message["Subject"] == "Refund decision"
    assert SMTP_FROM in mail.message["From"] and mail.message["To"] == "ada@example.com"
    assert mail.text().strip().splitlines() == ["Line one", "Line two"]
    (receipt,) = notification_receipts(runtime)
    assert receipt["outcome"] == "delivered" and receipt["recipient"] == "a***@example.com"
    assert_no_secret("result", result, secret_values(env))
    assert_no_secret("receipt", receipt, [*secret_values(env), "Line one"])


async def test_sendgrid_override_posts_the_v3_mail_payload_with_the_key_as_bearer(
    smtp: SMTPReceiver, web: WebhookReceiver, tmp_path: Path
) -> None:
    env = {
        **configured_env(smtp, web, tmp_path / "home"),
        "SENDGRID_API_KEY": SENDGRID_KEY,
        "BATON_SENDGRID_API_URL": web.url("/sendgrid"),
    }
    runtime = open_runtime(env)
    result = await Notifier(runtime).send_email("ada@example.com", "Hello", "Body text")
    assert result["provider"] == "sendgrid"
    (request,) = web.wait_for(1)
    assert request.path == "/sendgrid/v3/mail/send"
    assert request.headers["authorization"] == f"Bearer {SENDGRID_KEY}"
    assert request.json == {
        "personalizations": [{"to": [{"email": "ada@example.com"}]}],
        "from": {"email": SMTP_FROM},
        "subject": "Hello",
        "content": [{"type": "text/plain", "value": "Body text"}],
    }
    assert_no_secret("receipts", notification_receipts(runtime), secret_values(env))


async def test_telegram_slack_discord_and_webhook_posts_have_each_services_shape(
    runtime: Runtime, web: WebhookReceiver, env: dict[str, str]
) -> None:
    notifier = Notifier(runtime)
    telegram = await notifier.send_telegram("<b>hi</b>", "0", "html")
    slack = await notifier.send_slack("slack text")
    discord = await notifier.send_discord("discord text")
    exact = {"event": "x", "message": "m", "nested": {"a": [1, 2]}, "type": 3, "title": {"not": "text"}}
    hook = await notifier.send_webhook(exact)
    other = await notifier.send_webhook({"n": 1}, web.url("/elsewhere?tag=7"))
    requests = web.wait_for(5)
    by_path = {r.path: r for r in requests}
    sent = by_path[f"/telegram/bot{TELEGRAM_TOKEN}/sendMessage"]
    assert sent.json == {"chat_id": "0", "text": "<b>hi</b>", "parse_mode": "HTML"}
    assert by_path[SLACK_PATH].json == {"text": "slack text"}
    assert by_path[DISCORD_PATH].json == {"content": "discord text"}
    assert by_path[HITL_PATH].json == exact  # exactly the payload, whatever its keys
    assert by_path["/elsewhere"].json == {"n": 1} and by_path["/elsewhere"].query == {"tag": ["7"]}
    assert telegram["recipient"] == "chat …" and telegram["provider"] == "telegram"
    assert slack["recipient"] == discord["recipient"] == web.base_url.removeprefix("http://")
    results = [telegram, slack, discord, hook, other]
    assert_no_secret("results", results, secret_values(env))
    assert_no_secret("receipts", notification_receipts(runtime), secret_values(env))
    assert [r["channel"] for r in notification_receipts(runtime)] == [
        "telegram",
        "slack",
        "discord",
        "webhook",
        "webhook",
    ]


async def test_nothing_configured_answers_not_configured_and_attempts_nothing(
    web: WebhookReceiver, smtp: SMTPReceiver, tmp_path: Path
) -> None:
    runtime = open_runtime({"BATON_HOME": str(tmp_path / "home"), **DELIVERY})
    notifier = Notifier(runtime)
    email = await failure(notifier.send_email("nobody@example.invalid", "s", "b"))
    assert email.error_class == "notification_not_configured"
    assert email.details["missing"] == ["SMTP_HOST", "SMTP_FROM_EMAIL"]
    telegram = await failure(notifier.send_telegram("m", "0", "HTML"))
    assert telegram.details["missing"] == ["TELEGRAM_BOT_TOKEN"]
    assert (await failure(notifier.send_telegram("m"))).details["missing"] == [
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_DEFAULT_CHAT_ID",
    ]
    assert (await failure(notifier.send_slack("m"))).details["missing"] == ["SLACK_WEBHOOK_URL"]
    assert (await failure(notifier.send_discord("m"))).details["missing"] == ["DISCORD_WEBHOOK_URL"]
    assert (await failure(notifier.send_webhook({"a": 1}))).details["missing"] == ["HITL_WEBHOOK_URL"]
    assert web.requests == [] and smtp.messages == []
    receipts = notification_receipts(runtime)
    assert {r["outcome"] for r in receipts} == {"not_configured"} and len(receipts) == 6
    assert not any(r.ready for r in notifier.channels())


async def test_a_failing_server_gives_delivery_failed_after_bounded_retries(
    runtime: Runtime, web: WebhookReceiver, env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    web.status = 500
    notifier = Notifier(runtime)
    with anyio.fail_after(300):  # a hang guard; attempts and the error class prove the bound
        error = await failure(notifier.send_slack("will fail"))
    assert error.error_class == "notification_delivery_failed"
    assert error.details["attempts"] == 2 and "error=500" in error.details["reason"]
    assert len(web.requests) == 2
    (receipt,) = notification_receipts(runtime)
    assert receipt["outcome"] == "failed" and receipt["error_class"] == "notification_delivery_failed"
    assert_no_secret("error", error.to_result(), secret_values(env))
    assert_no_secret("receipt", receipt, secret_values(env))
    assert_no_secret("log", caplog.text, secret_values(env))


async def test_a_client_error_is_not_retried_and_a_transient_one_is(
    runtime: Runtime, web: WebhookReceiver
) -> None:
    notifier = Notifier(runtime)
    web.fail_next(1, 503)
    recovered = await notifier.send_discord("second time lucky")
    assert recovered["attempts"] == 2
    web.fail_next(1, 404)
    error = await failure(notifier.send_discord("gone"))
    assert error.details["attempts"] == 1 and "error=404" in error.details["reason"]


async def test_a_server_that_never_answers_fails_within_the_deadline(
    smtp: SMTPReceiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with WebhookReceiver() as hung, SilentServer() as silent:
        hung.hang()
        env = {
            **configured_env(smtp, hung, tmp_path / "home"),
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(silent.port),
            "BATON_NOTIFY_TIMEOUT_SECONDS": "0.5",  # the deadline is what is tested: the test waits it out
        }
        runtime = open_runtime(env)
        notifier = Notifier(runtime)
        with anyio.fail_after(300):  # a hang guard; attempts and the error class prove the bound
            slack = await failure(notifier.send_slack("hello?"))
        with anyio.fail_after(300):  # a hang guard; attempts and the error class prove the bound
            email = await failure(notifier.send_email(ADMIN_EMAIL, "s", "b"))
    assert slack.error_class == email.error_class == "notification_delivery_failed"
    assert slack.details["attempts"] == 2 and email.details["attempts"] == 2
    assert len(hung.requests) == 2 and silent.accepted == 2
    secrets = secret_values(env)
    assert_no_secret("errors", [slack.to_result(), email.to_result()], secrets)
    assert_no_secret("receipts", notification_receipts(runtime), secrets)
    assert_no_secret("log", caplog.text, secrets)


async def test_bad_arguments_are_refused_before_any_attempt(runtime: Runtime) -> None:
    notifier = Notifier(runtime)
    bad_url = await failure(notifier.send_webhook({"a": 1}, "ftp://127.0.0.1/x"))
    assert bad_url.error_class == "invalid_arguments"
    listed = await failure(notifier.send_email("a@example.org,b@example.org", "s", "b"))
    assert listed.error_class == "invalid_arguments"
    assert notification_receipts(runtime) == []


async def test_hitl_announcer_tells_every_configured_channel_and_never_raises(
    runtime: Runtime, web: WebhookReceiver, smtp: SMTPReceiver, env: dict[str, str]
) -> None:
    request = {
        "request_id": "req-123",
        "kind": "approval",
        "message": "Approve publishing the result?",
        "context": {"risk": "low"},
        "urgent": True,
        "created_at": "2026-12-02T14:00:00+00:00",
        "expires_at": "2026-12-02T14:05:00+00:00",
    }
    link = "http://127.0.0.1:8765/inbox/req-123?sig=signed-single-use-link-secret"
    announcer = runtime.services.get("hitl_announcer")
    assert announcer is None  # published by tools.register, not by the runtime itself
    from baton.notify.service import HitlAnnouncer

    results = await HitlAnnouncer(Notifier(runtime)).announce(request, link)
    assert [r["channel"] for r in results] == ["email", "telegram", "slack", "discord", "webhook"]
    assert all(r["success"] for r in results), results
    (mail,) = smtp.wait_for(1)
    assert mail.rcpt_tos == [ADMIN_EMAIL] and "URGENT" in mail.message["Subject"]
    assert link in mail.text() and "req-123" in mail.text()
    posts = {r.path: r.json for r in web.wait_for(4)}
    assert posts[HITL_PATH] == {"event": "hitl_request", "request": request, "link": link}
    assert "Approve publishing" in posts[SLACK_PATH]["text"]
    assert_no_secret("results", results, [*secret_values(env), link])
    assert_no_secret("receipts", notification_receipts(runtime), [*secret_values(env), link])

    web.status = 500
    failed = await HitlAnnouncer(Notifier(runtime)).announce(request, None)
    assert {r["channel"]: r["success"] for r in failed} == {
        "email": True,
        "telegram": False,
        "slack": False,
        "discord": False,
        "webhook": False,
    }


async def test_hitl_announcer_skips_unconfigured_channels_silently(
    web: WebhookReceiver, tmp_path: Path
) -> None:
    runtime = open_runtime(
        {"BATON_HOME": str(tmp_path / "home"), "SLACK_WEBHOOK_URL": web.url(SLACK_PATH), **DELIVERY}
    )
    from baton.notify.service import HitlAnnouncer

    request = {"request_id": "r1", "kind": "input", "message": "Which region?", "urgent": False}
    results = await HitlAnnouncer(Notifier(runtime)).announce(request, None)
    assert [r["channel"] for r in results] == ["slack"] and results[0]["success"]
    assert "baton hitl answer r1" in web.wait_for(1)[0].json["text"]
    assert [r["outcome"] for r in notification_receipts(runtime)] == ["delivered"]


async def test_timer_style_send_returns_a_result_instead_of_raising(
    runtime: Runtime, web: WebhookReceiver, smtp: SMTPReceiver
) -> None:
    notifier = Notifier(runtime)
    ok = await notifier.send("email", "timer fired")
    assert ok["success"] is True and ok["recipient"] == "a***@example.com"
    assert smtp.wait_for(1)[0].message["Subject"] == "baton notification"
    hook = await notifier.send("webhook", "tick")
    assert hook["success"] and web.wait_for(1)[0].json == {"event": "notification", "message": "tick"}
    unknown = await notifier.send("pager", "x")
    assert unknown["success"] is False and unknown["error_class"] == "invalid_arguments"
    web.status = 500
    failed = await notifier.send("slack", "x")
    assert failed["success"] is False and failed["error_class"] == "notification_delivery_failed"


def test_readiness_and_doctor_lines_name_providers_without_secrets(
    runtime: Runtime, env: dict[str, str]
) -> None:
    from baton.ops.doctor import check_notifications

    rows = [r.as_dict() for r in Notifier(runtime).channels()]
    assert [(r["channel"], r["ready"], r["provider"]) for r in rows] == [
        ("email", True, "smtp"),
        ("telegram", True, "telegram"),
        ("slack", True, "slack"),
        ("discord", True, "discord"),
        ("webhook", True, "webhook"),
    ]
    lines = check_notifications(runtime)
    assert [line.name for line in lines] == [
        "notify: email",
        "notify: telegram",
        "notify: slack",
        "notify: discord",
        "notify: webhook",
    ]
    assert_no_secret("readiness", rows, secret_values(env))
    assert_no_secret("doctor", [line.detail for line in lines], secret_values(env))


@pytest.mark.parametrize("mode", ["starttls", "ssl"])
async def test_email_over_starttls_and_implicit_tls_logs_in_on_the_encrypted_connection(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton.testing.smtp import self_signed_certificate

    certificate = self_signed_certificate(tmp_path / "tls")
    # the client verifies the server; trusting the test certificate is the only change
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    tls = "starttls" if mode == "starttls" else "ssl"
    with SMTPReceiver(
        username=SMTP_USERNAME, password=SMTP_PASSWORD, tls=tls, certificate=certificate
    ) as server:
        env = {
            "BATON_HOME": str(tmp_path / "home"),
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(server.port),
            "BATON_SMTP_SECURITY": mode,
            "SMTP_USERNAME": SMTP_USERNAME,
            "SMTP_PASSWORD": SMTP_PASSWORD,
            "SMTP_FROM_EMAIL": SMTP_FROM,
            **DELIVERY,
        }
        result = await Notifier(open_runtime(env)).send_email("ada@example.com", "Encrypted", "Hello")
        (mail,) = server.wait_for(1)
    assert result["provider"] == "smtp"
    assert mail.tls is True and mail.login == SMTP_USERNAME and mail.message["Subject"] == "Encrypted"


async def test_an_untrusted_certificate_fails_closed(tmp_path: Path) -> None:
    from baton.testing.smtp import self_signed_certificate

    certificate = self_signed_certificate(tmp_path / "tls")
    with SMTPReceiver(tls="starttls", certificate=certificate) as server:
        env = {
            "BATON_HOME": str(tmp_path / "home"),
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(server.port),
            "SMTP_FROM_EMAIL": SMTP_FROM,
            **DELIVERY,
        }
        error = await failure(Notifier(open_runtime(env)).send_email("ada@example.com", "s", "b"))
    assert error.error_class == "notification_delivery_failed" and server.messages == []


async def test_hitl_announcer_copes_with_non_json_values_and_long_context(
    runtime: Runtime, web: WebhookReceiver
) -> None:
    from datetime import UTC, datetime

    from baton.notify.service import HitlAnnouncer

    created = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
    request = {
        "request_id": "r2",
        "kind": "approval",
        "message": "m",
        "created_at": created,
        "context": {"big": "x" * 9000},
    }
    results = await HitlAnnouncer(Notifier(runtime)).announce(request, None)
    assert all(r["success"] for r in results if r["channel"] != "email"), results
    posts = {r.path: r.json for r in web.wait_for(4)}
    assert posts[HITL_PATH]["request"]["created_at"] == str(created)
    telegram = next(body for path, body in posts.items() if path.endswith("/sendMessage"))
    assert len(telegram["text"]) <= 4000
