"""The email channel: SMTP (STARTTLS, SSL or plain to loopback; AUTH when credentials are set) or SendGrid."""

from __future__ import annotations

import re

from baton.config import Settings
from baton.errors import ArgumentError, ConfigError
from baton.evidence.redaction import email_hint
from baton.http.addresses import is_loopback
from baton.notify.channels import (
    Readiness,
    Target,
    json_service,
    not_configured,
    present,
)

SMTP_DEFAULT_PORTS = {"ssl": 465, "starttls": 587, "none": 25}
#: One plain address (no display name, no list): apprise would split ``a@x.org,b@y.org`` into two.
EMAIL_ADDRESS = (
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$"
)
EMAIL_PATTERN = re.compile(EMAIL_ADDRESS)


def _smtp_sender(settings: Settings) -> str | None:
    if settings.smtp_from_email:
        return settings.smtp_from_email
    username = settings.smtp_username or ""
    return username if EMAIL_PATTERN.match(username) else None


def smtp_security(settings: Settings) -> tuple[str, int]:
    """The SMTP mode (``starttls``, ``ssl`` or ``none``) and port, from BATON_SMTP_SECURITY or the port."""
    mode = (settings.baton_smtp_security or "").strip().lower()
    if not mode:
        mode = "ssl" if settings.smtp_port == 465 else "starttls"
    if mode not in SMTP_DEFAULT_PORTS:
        raise ConfigError("config_invalid", "BATON_SMTP_SECURITY must be starttls, ssl or none.")
    port = settings.smtp_port or SMTP_DEFAULT_PORTS[mode]
    if mode == "none" and settings.smtp_password and not is_loopback(settings.smtp_host or ""):
        raise ConfigError(
            "config_invalid",
            "BATON_SMTP_SECURITY=none would send SMTP_PASSWORD in clear text; it is only allowed "
            "to a loopback SMTP_HOST.",
        )
    return mode, port


def known_mail_server(address: str | None) -> tuple[str, str, int | None, str | None] | None:
    """The SMTP server apprise's table of well-known mail domains gives ``address``, if any.

    Returns ``(provider name, smtp host, port, mode)``; apprise's own table
    (``apprise.plugins.email.templates.EMAIL_TEMPLATES``) is read, not copied.
    """
    if not address or not EMAIL_PATTERN.match(address):
        return None
    from apprise.plugins.email.templates import EMAIL_TEMPLATES

    for name, pattern, defaults in EMAIL_TEMPLATES:
        if pattern.match(address) and defaults.get("smtp_host"):
            mode = str(defaults.get("secure_mode") or "") or None
            port = defaults.get("port")
            return str(name), str(defaults["smtp_host"]), port if isinstance(port, int) else None, mode
    return None


def with_known_server(settings: Settings) -> Settings:
    """The reference runner's rule: without SMTP_HOST, a login at a mail provider apprise knows names the server."""
    if settings.smtp_host or settings.sendgrid_api_key or not settings.smtp_username:
        return settings
    known = known_mail_server(settings.smtp_username)
    if known is None:
        return settings
    _name, host, port, mode = known
    update: dict[str, object] = {"smtp_host": host}
    if settings.smtp_port is None and port:
        update["smtp_port"] = port
    if not settings.baton_smtp_security and mode in SMTP_DEFAULT_PORTS:
        update["baton_smtp_security"] = mode
    return settings.model_copy(update=update)


def email_readiness(settings: Settings) -> Readiness:
    """Email through SendGrid (when SENDGRID_API_KEY is set) or SMTP."""
    derived = with_known_server(settings)
    if derived is not settings:
        ready = email_readiness(derived)
        known = known_mail_server(settings.smtp_username)
        origin = f"; server from apprise's table for {known[0]}, as SMTP_HOST was unset" if known else ""
        return Readiness(ready.channel, ready.ready, ready.provider, ready.missing, ready.detail + origin)
    if settings.sendgrid_api_key:
        missing = () if settings.smtp_from_email else ("SMTP_FROM_EMAIL",)
        endpoint = "BATON_SENDGRID_API_URL" if settings.baton_sendgrid_api_url else "api.sendgrid.com"
        return Readiness("email", not missing, "sendgrid", missing, f"SendGrid via {endpoint}")
    missing_list = [] if settings.smtp_host else ["SMTP_HOST"]
    if not _smtp_sender(settings):
        missing_list.append("SMTP_FROM_EMAIL")
    if bool(settings.smtp_username) != bool(settings.smtp_password):
        missing_list.append("SMTP_PASSWORD" if settings.smtp_username else "SMTP_USERNAME")
    if missing_list:
        provider = "smtp" if settings.smtp_host else None
        hint = "" if provider else " (or SENDGRID_API_KEY and SMTP_FROM_EMAIL for SendGrid)"
        return Readiness("email", False, provider, tuple(missing_list), f"not configured{hint}")
    try:
        mode, port = smtp_security(settings)
    except ConfigError as exc:
        return Readiness("email", False, "smtp", (), f"{exc.error_class}: {exc.message}")
    login = "with login" if settings.smtp_username else "without login"
    return Readiness("email", True, "smtp", (), f"SMTP {settings.smtp_host}:{port} ({mode}, {login})")


def email_target(settings: Settings, to_email: str, subject: str, body: str) -> Target:
    """An email to ``to_email``: SendGrid when its key is set, otherwise SMTP."""
    settings = with_known_server(settings)
    readiness = email_readiness(settings)
    if readiness.missing:
        raise not_configured("email", readiness.missing)
    if not EMAIL_PATTERN.match(to_email):
        raise ArgumentError("invalid_arguments", "to_email must be one plain email address.")
    subject = " ".join(subject.splitlines())
    if readiness.provider == "sendgrid":
        return _sendgrid_target(settings, to_email, subject, body)
    mode, port = smtp_security(settings)
    service = {
        "schema": "mailto" if mode == "none" else "mailtos",
        "host": settings.smtp_host,
        "port": port,
        "smtp_host": settings.smtp_host,
        "secure_mode": "insecure" if mode == "none" else mode,
        "secure": mode != "none",
        "user": settings.smtp_username,
        "password": settings.smtp_password,
        "from_addr": _smtp_sender(settings),
        "targets": [to_email],
        "format": "text",
    }
    secrets = present(settings.smtp_username, settings.smtp_password, to_email)
    return Target("email", "smtp", email_hint(to_email), service, body, subject, "text", secrets)


def _sendgrid_target(settings: Settings, to_email: str, subject: str, body: str) -> Target:
    key, sender = settings.sendgrid_api_key or "", settings.smtp_from_email or ""
    secrets = present(key, to_email)
    if settings.baton_sendgrid_api_url:
        mail = {
            "personalizations": [{"to": [{"email": to_email}]}],
            "from": {"email": sender},
            "subject": subject,
            "content": [{"type": "text/plain", "value": body}],
        }
        url = settings.baton_sendgrid_api_url.rstrip("/") + "/v3/mail/send"
        service = json_service(
            url, mail, variable="BATON_SENDGRID_API_URL", headers={"Authorization": f"Bearer {key}"}
        )
        return Target("email", "sendgrid", email_hint(to_email), service, body, subject, "text", secrets)
    service = {
        "schema": "sendgrid",
        "apikey": key,
        "from_email": sender,
        "targets": [to_email],
        "format": "text",
    }
    return Target("email", "sendgrid", email_hint(to_email), service, body, subject, "text", secrets)
