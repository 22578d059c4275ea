"""The reference runner's email readiness: a login at a mail provider apprise knows needs no SMTP_HOST."""

from __future__ import annotations

import pytest

from baton.config import load_settings
from baton.errors import BatonError
from baton.notify import mail
from baton.notify.readiness import readiness


def test_a_gmail_login_without_smtp_host_uses_apprises_server_for_gmail() -> None:
    settings = load_settings({"SMTP_USERNAME": "ada@gmail.com", "SMTP_PASSWORD": "app-password-123"})
    ready = mail.email_readiness(settings)
    assert (ready.ready, ready.provider, ready.missing) == (True, "smtp", ())
    assert "smtp.gmail.com:587" in ready.detail
    assert "Google Mail" in ready.detail
    target = mail.email_target(settings, "bob@example.com", "subject", "body")
    assert isinstance(target.service, dict)
    assert target.service["smtp_host"] == "smtp.gmail.com"
    assert target.service["port"] == 587
    assert target.service["secure_mode"] == "starttls"
    assert target.service["from_addr"] == "ada@gmail.com"
    assert "app-password-123" not in ready.detail


def test_a_provider_apprise_knows_with_implicit_tls_keeps_its_mode() -> None:
    settings = load_settings({"SMTP_USERNAME": "ada@yandex.ru", "SMTP_PASSWORD": "pw-0987654321"})
    target = mail.email_target(settings, "bob@example.com", "s", "b")
    assert isinstance(target.service, dict)
    assert (target.service["smtp_host"], target.service["port"], target.service["secure_mode"]) == (
        "smtp.yandex.ru",
        465,
        "ssl",
    )


def test_an_unknown_domain_still_needs_smtp_host() -> None:
    settings = load_settings({"SMTP_USERNAME": "ada@example.org", "SMTP_PASSWORD": "pw-1234567890"})
    ready = mail.email_readiness(settings)
    assert ready.ready is False
    assert "SMTP_HOST" in ready.missing
    with pytest.raises(BatonError) as caught:
        mail.email_target(settings, "bob@example.com", "s", "b")
    assert caught.value.error_class == "notification_not_configured"
    assert "SMTP_HOST" in caught.value.message


def test_an_explicit_smtp_host_wins_over_the_table() -> None:
    settings = load_settings(
        {"SMTP_HOST": "relay.example.org", "SMTP_USERNAME": "ada@gmail.com", "SMTP_PASSWORD": "pw-1234567890"}
    )
    target = mail.email_target(settings, "bob@example.com", "s", "b")
    assert isinstance(target.service, dict)
    assert target.service["smtp_host"] == "relay.example.org"


def test_a_known_login_without_a_password_names_the_password() -> None:
    settings = load_settings({"SMTP_USERNAME": "ada@gmail.com"})
    rows = {row.channel: row for row in readiness(settings)}
    assert rows["email"].ready is False
    assert rows["email"].missing == ("SMTP_PASSWORD",)


def test_an_announcement_does_not_repeat_a_short_message_as_title_and_body() -> None:
    from baton.notify.request_text import announcement_text

    request = {"request_id": "hitl_1", "kind": "approval", "message": "Deploy v2 to production?"}
    title, body = announcement_text(request, None)
    assert title == "[baton] Approval requested: Deploy v2 to production?"
    assert "Deploy v2 to production?" not in body
    assert body.startswith("Request: hitl_1")

    long = {"request_id": "hitl_2", "kind": "input", "message": "Which region? " * 20}
    title, body = announcement_text(long, None)
    assert title.endswith("…")
    assert body.startswith(long["message"])
    assert body.count(long["message"]) == 1


@pytest.mark.parametrize(
    ("username", "ready"), [("ada@gmail.com", True), ("ada@example.org", False)], ids=["gmail", "unknown"]
)
def test_the_campaigns_email_preflight_follows_the_servers_rule(username: str, ready: bool) -> None:
    from baton.campaign.gates import notification_readiness

    env = {"SMTP_USERNAME": username, "SMTP_PASSWORD": "pw-1234567890", "HITL_ADMIN_EMAIL": "ops@example.com"}
    assert notification_readiness(env)["email"] is ready
