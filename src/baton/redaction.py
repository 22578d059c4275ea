"""Redaction of credentials: configured secret values and credential-shaped strings become ``[REDACTED]``.

Kept free of heavy imports: the server's logging uses it before the store is opened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.errors import ReceiptError

CREDENTIAL_PATTERN = re.compile(r"\b(?:sk|gh[opusr])-[A-Za-z0-9_-]{12,}\b")
REDACTED = "[REDACTED]"
#: Shorter sensitive values (a chat id such as "0") are only redacted where a whole string equals them.
MIN_SUBSTRING_SECRET = 8


@dataclass(frozen=True)
class Redactor:
    """Replaces configured credential values and credential-shaped strings with ``[REDACTED]``."""

    sensitive_values: Sequence[str] = ()

    def text(self, value: str) -> str:
        """Redact one string."""
        if value in self.sensitive_values:
            return REDACTED
        for secret in self.sensitive_values:
            if len(secret) >= MIN_SUBSTRING_SECRET and secret in value:
                value = value.replace(secret, REDACTED)
        return CREDENTIAL_PATTERN.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-shaped value (keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(key)): self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
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
