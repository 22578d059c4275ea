"""Redaction of credentials: configured secret values and credential-shaped strings become ``[REDACTED]``,
and the hints that show an address (email, chat, endpoint) without revealing it.

Kept free of heavy imports: the server's logging uses it before the store is opened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from baton.errors import ReceiptError

CREDENTIAL_PATTERN = re.compile(r"\b(?:sk|gh[opusr])-[A-Za-z0-9_-]{12,}\b")
#: The same shape without the word boundaries: every match of CREDENTIAL_PATTERN inside a string is a
#: match of this one inside that string's JSON text too (an escape such as ``\n`` before it would
#: break a boundary there), so "no match here" proves "nothing to redact".
_LOOSE_CREDENTIAL = re.compile(r"(?:sk|gh[opusr])-[A-Za-z0-9_-]{12,}")
REDACTED = "[REDACTED]"
#: Shorter sensitive values (a chat id such as "0") are only redacted where a whole string equals them.
MIN_SUBSTRING_SECRET = 8


#: ``scheme://user:password@`` in any URL: the password part is masked.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*):(?P<password>[^@\s/]+)@")
MASKED = "***"


def mask_url_passwords(text: str) -> str:
    """Mask the password of every ``scheme://user:password@host`` URL in ``text``."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASKED}@", text)


@dataclass(frozen=True)
class Redactor:
    """Replaces configured credential values and credential-shaped strings with ``[REDACTED]``."""

    sensitive_values: Sequence[str] = ()

    def __post_init__(self) -> None:
        # The serialized pre-check below finds a secret only if JSON writes it verbatim.
        verbatim = all(json.dumps(s, ensure_ascii=False) == f'"{s}"' for s in self.sensitive_values)
        object.__setattr__(self, "_precheck", verbatim)

    def text(self, value: str) -> str:
        """Redact one string."""
        if value in self.sensitive_values:
            return REDACTED
        for secret in self.sensitive_values:
            if len(secret) >= MIN_SUBSTRING_SECRET and secret in value:
                value = value.replace(secret, REDACTED)
        return CREDENTIAL_PATTERN.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-shaped value (keys included).

        A container is serialized once and searched first; one that cannot hold a secret is returned as
        it is, without walking every string in it.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict | list | tuple) and self._clean(value):
            return value
        return self._walk(value)

    def canonical(self, value: dict[str, Any], where: str) -> tuple[dict[str, Any], str]:
        """``value`` redacted and its canonical JSON, refused (``receipt_contains_secret``) if a credential
        survives: the canonical text is searched once, and a value it proves clean is neither walked nor
        serialized again."""
        from baton.evidence.canonical import canonical_json

        if getattr(self, "_precheck", False):
            try:
                serialized = canonical_json(value)
            except (TypeError, ValueError):
                pass
            else:
                if not self._holds_secret(serialized):
                    return value, serialized
        clean: dict[str, Any] = self.value(value)
        serialized = canonical_json(clean)
        self.guard(serialized, where)
        return clean, serialized

    def _holds_secret(self, serialized: str) -> bool:
        """Whether a JSON text may hold a credential-shaped string or a configured value (no: proven clean)."""
        if _LOOSE_CREDENTIAL.search(serialized):
            return True
        for secret in self.sensitive_values:
            needle = secret if len(secret) >= MIN_SUBSTRING_SECRET else f'"{secret}"'
            if needle in serialized:
                return True
        return False

    def _clean(self, value: Any) -> bool:
        """Whether the JSON text of ``value`` proves that no string in it needs redacting."""
        if not getattr(self, "_precheck", False):
            return False
        try:
            serialized = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return False
        return not self._holds_secret(serialized)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(key)): self._walk(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(item) for item in value]
        return value

    def leaks(self, serialized: str) -> bool:
        """Whether a serialized document still holds a credential."""
        if CREDENTIAL_PATTERN.search(serialized):
            return True
        return any(len(s) >= MIN_SUBSTRING_SECRET and s in serialized for s in self.sensitive_values)

    def guard(self, serialized: str, where: str) -> None:
        """Refuse a write whose text still holds a credential."""
        if self.leaks(serialized):
            raise ReceiptError("receipt_contains_secret", f"Refused to write {where}: it holds a credential.")


_ENVIRONMENT_REDACTOR: list[Redactor] = []


def environment_redactor() -> Redactor:
    """The redactor for this process's configured credentials (CLI output is redacted with it)."""
    if not _ENVIRONMENT_REDACTOR:
        from baton.config import load_settings

        _ENVIRONMENT_REDACTOR.append(Redactor(load_settings().sensitive_values()))
    return _ENVIRONMENT_REDACTOR[0]


def redact_output(value: Any) -> Any:
    """A JSON-shaped value as the CLI may print it: credentials redacted, URL passwords masked."""
    redactor = environment_redactor()
    if isinstance(value, str):
        return mask_url_passwords(redactor.text(value))
    if isinstance(value, dict):
        return {redact_output(str(k)): redact_output(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_output(item) for item in value]
    return value


def email_hint(address: str) -> str:
    """``ada@example.com`` → ``a***@example.com``."""
    local, _, domain = address.partition("@")
    return f"{local[:1]}***@{domain}"


def chat_hint(chat_id: str) -> str:
    """A Telegram chat id reduced to its last two characters (``chat …89``)."""
    return f"chat …{chat_id[-2:]}" if len(chat_id) > 4 else "chat …"


def url_hint(url: str) -> str:
    """An endpoint reduced to its host and port; paths and queries often hold the secret."""
    split = urlsplit(url)
    host = split.hostname or "?"
    return f"{host}:{split.port}" if split.port else host
