"""A real SMTP server on 127.0.0.1 (aiosmtpd) that keeps every message it receives.

It speaks plain SMTP (no TLS, so configure ``BATON_SMTP_SECURITY=none`` against it) and can
require AUTH LOGIN/PLAIN with one username and password, so a test proves the client
really logged in. Messages are parsed with the standard library's ``email`` package.
"""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any


@dataclass
class ReceivedMail:
    """One message as the server accepted it."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    raw: bytes
    login: str | None = None

    def text(self) -> str:
        """The plain-text body (the first text part of a multipart message)."""
        part = self.message.get_body(preferencelist=("plain", "html"))
        assert part is not None, "message has no text body"
        return str(part.get_content())


def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SMTPReceiver:
    """An aiosmtpd server in a thread; use as a context manager or call start()/stop()."""

    username: str | None = None
    password: str | None = None
    messages: list[ReceivedMail] = field(default_factory=list)
    port: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _controller: Any = None

    @property
    def host(self) -> str:
        """The host to configure as ``SMTP_HOST``."""
        return "127.0.0.1"

    def start(self) -> SMTPReceiver:
        """Listen on a free port of 127.0.0.1."""
        from aiosmtpd.controller import Controller

        self.port = free_port()
        kwargs: dict[str, Any] = {}
        if self.username is not None:
            kwargs = {
                # AUTH is offered over plain SMTP on loopback; DATA refuses unauthenticated senders
                # (aiosmtpd's own auth_required warns when TLS is not required as well).
                "authenticator": self._authenticate,
                "auth_require_tls": False,
            }
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port, **kwargs)
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stop the server."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> SMTPReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[ReceivedMail]:
        """Block until at least ``count`` messages arrived (AssertionError after ``timeout``)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.messages) >= count, timeout):
                raise AssertionError(f"expected {count} messages, received {len(self.messages)}")
            return list(self.messages)

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult, LoginPassword

        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == self.username
            and auth_data.password.decode() == self.password
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    def _keep(self, mail: ReceivedMail) -> None:
        with self._changed:
            self.messages.append(mail)
            self._changed.notify_all()


class _Handler:
    def __init__(self, receiver: SMTPReceiver) -> None:
        self.receiver = receiver

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's hook name)
        if self.receiver.username is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        raw = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        auth = getattr(session, "auth_data", None)
        login = auth.login.decode() if auth is not None and hasattr(auth, "login") else None
        self.receiver._keep(ReceivedMail(envelope.mail_from, list(envelope.rcpt_tos), message, raw, login))
        return "250 Message accepted for delivery"
