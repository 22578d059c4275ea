"""Signed inbox links, inbox session cookies and per-form CSRF tokens, all HMAC-SHA256 under one secret.

The secret starts from 32 random bytes kept in ``BATON_HOME/hitl_link_secret`` (mode 0600, shared by
the server and the CLI). When ``BATON_HTTP_TOKEN`` or ``BATON_ADMIN_TOKEN`` is set, the tokens are
stretched with scrypt (salted with that file) and mixed in, so rotating a token revokes every link and
session, while a leaked link cannot be brute-forced offline to recover a token: the attacker would
need the random file too. Each use (link, session, CSRF) has its own key derived with a label.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from baton import clock
from baton.config import Settings
from baton.errors import ConfigError, HitlError
from baton.runtime import Runtime

SECRET_FILE = "hitl_link_secret"  # noqa: S105 (a file name, not a secret)
SESSION_TTL_SECONDS = 12 * 3600
_TOKEN_LABEL = b"baton-hitl-link-secret-v2"


@dataclass(frozen=True)
class LinkClaim:
    """A verified link: the one request it is bound to, its nonce (spent on use) and expiry."""

    request_id: str
    nonce: str
    expires_epoch: int


def same(expected: str, supplied: str) -> bool:
    """Constant-time equality of two strings as UTF-8 bytes (``compare_digest`` raises on non-ASCII str)."""
    return hmac.compare_digest(expected.encode("utf-8"), supplied.encode("utf-8", errors="surrogatepass"))


def _digits(text: str) -> bool:
    """ASCII digits only (``"²".isdigit()`` is true, but ``int("²")`` raises)."""
    return text.isascii() and text.isdigit()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def load_secret(settings: Settings) -> bytes:
    """The signing secret: the home's random secret, with the HTTP tokens (when set) mixed in by a KDF."""
    home_secret = _home_secret(Path(settings.home) / SECRET_FILE)
    tokens = [token for token in (settings.baton_http_token, settings.baton_admin_token) if token]
    if not tokens:
        return home_secret
    stretched = hashlib.scrypt(
        "\n".join(tokens).encode(), salt=home_secret, n=2**14, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=32
    )
    return hmac.new(home_secret, _TOKEN_LABEL + stretched, hashlib.sha256).digest()


def _home_secret(path: Path) -> bytes:
    """32 random bytes in ``path`` (created 0600 on first use, reset to 0600 when read)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        try:
            secret = bytes.fromhex(path.read_text(encoding="ascii").strip())
        except ValueError:
            secret = b""
        if len(secret) < 32:
            raise ConfigError("config_invalid", f"{path} does not hold a 32-byte secret.") from None
        return secret
    secret = secrets.token_bytes(32)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secret.hex() + "\n")
    return secret


class LinkSigner:
    """Signs and checks links, sessions and CSRF tokens."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> LinkSigner:
        """The runtime's signer (cached in its services)."""
        signer = runtime.services.get("hitl_link_signer")
        if not isinstance(signer, LinkSigner):
            signer = runtime.services["hitl_link_signer"] = cls(load_secret(runtime.settings))
        return signer

    def _mac(self, label: str, *parts: str) -> str:
        key = hmac.new(self._secret, label.encode(), hashlib.sha256).digest()
        return _b64(hmac.new(key, "\n".join(parts).encode(), hashlib.sha256).digest())

    def sign(self, label: str, *parts: str) -> str:
        """The MAC of ``parts`` under a key of its own for ``label`` (enrollment links, passkey ceremonies)."""
        if label in ("link", "session", "csrf"):
            raise ValueError(f"{label!r} is signed by its own method")
        return self._mac(label, *parts)

    # links ----------------------------------------------------------------------------------------

    def link(self, base_url: str, request_id: str, expires_epoch: float, nonce: str | None = None) -> str:
        """``{base}/inbox/link?r=…&e=…&n=…&s=…``: bound to one request, expiring, single use."""
        query = self.link_params(request_id, expires_epoch, nonce)
        return f"{base_url.rstrip('/')}/inbox/link?{urlencode(query)}"

    def link_params(self, request_id: str, expires_epoch: float, nonce: str | None = None) -> dict[str, str]:
        """The signed query of a link."""
        expires = str(int(expires_epoch))
        nonce = nonce or secrets.token_urlsafe(16)
        return {"r": request_id, "e": expires, "n": nonce, "s": self._mac("link", request_id, expires, nonce)}

    def verify_link(self, r: str, e: str, n: str, s: str, *, now: float | None = None) -> LinkClaim:
        """Check a link's signature and expiry (its single use is checked against the store)."""
        if not (r and _digits(e) and n and s) or len(n) > 64 or len(r) > 40 or len(e) > 12:
            raise HitlError("hitl_link_invalid", "This link is malformed.", reason="malformed")
        if not same(self._mac("link", r, e, n), s):
            raise HitlError("hitl_link_invalid", "This link's signature does not verify.", reason="forged")
        if int(e) <= (clock.time() if now is None else now):
            raise HitlError("hitl_link_invalid", "This link has expired.", reason="expired")
        return LinkClaim(request_id=r, nonce=n, expires_epoch=int(e))

    # sessions and CSRF ----------------------------------------------------------------------------

    def new_session(
        self, ttl_seconds: int = SESSION_TTL_SECONDS, person: str | None = None, passkey: str | None = None
    ) -> str:
        """A signed session cookie value ``sid.expiry.mac``: a token session, or one bound to ``person``
        (who logged in with a passkey), whose sid is ``base64url(name)~random`` under the same MAC, or
        ``base64url(name)~PASSKEY~random`` naming the passkey's digest (revoking it ends the session)."""
        sid = secrets.token_urlsafe(18)
        if person is not None:
            sid = f"{_b64(person.encode())}~{f'{passkey}~' if passkey else ''}{sid}"
        expires = str(int(clock.time()) + ttl_seconds)
        return f"{sid}.{expires}.{self._mac('session', sid, expires)}"

    def verify_session(self, value: str | None) -> str | None:
        """The session id of a valid, unexpired cookie value, else None (revocation is the broker's)."""
        parsed = self.session_parts(value)
        return parsed[0] if parsed else None

    def session_parts(self, value: str | None) -> tuple[str, int] | None:
        """``(sid, expires_epoch)`` of a valid, unexpired cookie value, else None."""
        if not value or value.count(".") != 2:
            return None
        sid, expires, mac = value.split(".")
        if not _digits(expires) or len(expires) > 12 or not same(self._mac("session", sid, expires), mac):
            return None
        return (sid, int(expires)) if int(expires) > clock.time() else None

    @staticmethod
    def session_passkey(sid: str) -> str | None:
        """The digest of the passkey a person's session was opened with (None when it names none)."""
        parts = sid.split("~")
        return parts[1] if len(parts) == 3 else None

    @staticmethod
    def session_person(sid: str) -> str | None:
        """The person a session id is bound to (None for a token session)."""
        if "~" not in sid:
            return None
        encoded = sid.split("~", 1)[0]
        try:
            return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None

    def csrf(self, binding: str, request_id: str) -> str:
        """The per-form token tied to a session (or link nonce) and the request the form decides."""
        return self._mac("csrf", binding, request_id)

    def check_csrf(self, binding: str, request_id: str, supplied: str | None) -> None:
        """Refuse a form whose token is missing or was made for another session, link or request."""
        if not supplied or not same(self.csrf(binding, request_id), supplied):
            raise HitlError("hitl_csrf_invalid", "The form's security token is missing or invalid.")


#: The signing fingerprint of the last ``baton serve --http`` on this home (see :func:`record_served`).
SERVED_FILE = "hitl_link_secret.served"


def fingerprint(signer: LinkSigner) -> str:
    """A public digest of a signer's secret (it reveals nothing of it): do two processes sign alike?"""
    return signer._mac("fingerprint", "v1")


def record_served(runtime: Runtime) -> None:
    """Note how the serving process signs, so ``baton hitl link`` in another shell can tell whether the
    server would accept its links (a shell without the server's tokens signs differently)."""
    path = Path(runtime.settings.home) / SERVED_FILE
    staging = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(fingerprint(LinkSigner.for_runtime(runtime)) + "\n")
    os.replace(staging, path)


def served_fingerprint(settings: Settings) -> str | None:
    """The fingerprint the last HTTP server on this home signs with, or None when none has run."""
    try:
        return (Path(settings.home) / SERVED_FILE).read_text(encoding="ascii").strip() or None
    except OSError:
        return None
