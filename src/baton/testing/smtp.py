"""A real SMTP server on 127.0.0.1 (aiosmtpd) that keeps every message it receives.

By default it speaks plain SMTP (configure ``BATON_SMTP_SECURITY=none`` against it); with
``tls="starttls"`` or ``tls="ssl"`` and a certificate (see :func:`self_signed_certificate`; point
``SSL_CERT_FILE`` at it so clients trust it) it requires STARTTLS or speaks implicit TLS. It can
require AUTH LOGIN/PLAIN with one username and password, so a test proves the client really
logged in. Messages are parsed with the standard library's ``email`` package.
"""

from __future__ import annotations

import datetime
import email
import email.policy
import ipaddress
import socket
import ssl
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal


@dataclass
class ReceivedMail:
    """One message as the server accepted it."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    raw: bytes
    login: str | None = None
    tls: bool = False

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


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for ``127.0.0.1`` (valid one day), written under ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    certfile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return certfile, keyfile


@dataclass
class SMTPReceiver:
    """An aiosmtpd server in a thread; use as a context manager or call start()/stop()."""

    username: str | None = None
    password: str | None = None
    tls: Literal["starttls", "ssl"] | None = None
    certificate: tuple[Path, Path] | None = None
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
            # DATA refuses unauthenticated senders (aiosmtpd's own auth_required warns without TLS).
            # aiosmtpd only counts STARTTLS as TLS for auth_require_tls; implicit TLS is encrypted anyway.
            kwargs = {"authenticator": self._authenticate, "auth_require_tls": self.tls == "starttls"}
        if self.tls is not None:
            assert self.certificate is not None, "tls needs a certificate (see self_signed_certificate)"
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.certificate)
            if self.tls == "starttls":
                kwargs.update(tls_context=context, require_starttls=True)
            else:
                kwargs.update(ssl_context=context)
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

    def wait_for(self, count: int, timeout: float = 300.0) -> list[ReceivedMail]:
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
        tls = server.transport.get_extra_info("ssl_object") is not None
        self.receiver._keep(
            ReceivedMail(envelope.mail_from, list(envelope.rcpt_tos), message, raw, login, tls)
        )
        return "250 Message accepted for delivery"
