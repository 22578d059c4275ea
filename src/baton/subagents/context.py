"""Context strategies and the privacy filter that runs before any model sees anything.

The filter removes keys that name private data and values shaped like credentials. After an
``llm_generated`` preparation, none of the removed values may appear in the prepared text:
if one does, the spawn fails closed with ``context_privacy_violation``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.errors import SubagentError
from baton.evidence.receipts import CREDENTIAL_PATTERN

ContextStrategy = Literal["minimal", "llm_generated", "full"]

#: Key fragments that name private data; a key containing one (case-insensitive) is removed.
DEFAULT_PRIVATE_KEY_FRAGMENTS: tuple[str, ...] = (
    "private",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "token",
    "credential",
    "api_key",
    "apikey",
    "access_key",
    "authorization",
    "cookie",
    "session_id",
    "ssn",
    "social_security",
    "credit_card",
    "card_number",
    "cvv",
    "iban",
    "pin_code",
)

#: Values shaped like credentials, beyond the receipts' credential pattern.
CREDENTIAL_VALUE_PATTERNS: tuple[re.Pattern[str], ...] = (
    CREDENTIAL_PATTERN,
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),  # JWT
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),  # Slack token
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_-]{30,}\b"),  # Telegram bot token
)

#: Removed string values shorter than this are not searched for in prepared text (too many false hits).
MIN_CANARY_LENGTH = 6


@dataclass
class FilteredContext:
    """The context after the privacy filter, with what was removed."""

    value: dict[str, Any]
    filtered_fields: list[str] = field(default_factory=list)
    removed_values: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PrivacyFilter:
    """Removes private keys and credential-shaped values from a JSON object."""

    key_fragments: tuple[str, ...] = DEFAULT_PRIVATE_KEY_FRAGMENTS
    sensitive_values: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, extra_fragments: str | None, sensitive_values: Iterable[str]) -> PrivacyFilter:
        """The default fragments plus ``BATON_PRIVATE_KEYS`` (comma-separated)."""
        extra = tuple(f.strip().lower() for f in (extra_fragments or "").split(",") if f.strip())
        return cls(DEFAULT_PRIVATE_KEY_FRAGMENTS + extra, tuple(sensitive_values))

    def is_private_key(self, key: str) -> bool:
        """Whether a key names private data."""
        lowered = key.lower().replace("-", "_")
        return any(fragment in lowered for fragment in self.key_fragments)

    def is_credential_value(self, value: str) -> bool:
        """Whether a string looks like (or is) a credential."""
        if any(pattern.search(value) for pattern in CREDENTIAL_VALUE_PATTERNS):
            return True
        return any(len(s) >= 8 and s in value for s in self.sensitive_values)

    def apply(self, context: dict[str, Any] | None) -> FilteredContext:
        """Filter a parent context; ``None`` is an empty context."""
        result = FilteredContext(value={})
        result.value = self._walk(context or {}, "", result)
        return result

    def filter_result(self, value: Any) -> Any:
        """A tool's result as a model may see it: private keys and credential-shaped values removed, in
        JSON objects and in text that holds a JSON object or array; then no removed value is left in any
        other string (an upstream that repeats a private value elsewhere is filtered there too)."""
        out = FilteredContext(value={})
        cleaned = self._walk_result(value, out)
        removed = [v for v in out.removed_values if len(v) >= MIN_CANARY_LENGTH]
        return _scrub(cleaned, removed) if removed else cleaned

    def _walk_result(self, value: Any, out: FilteredContext) -> Any:
        if isinstance(value, dict):
            return self._walk(value, "", out)
        if isinstance(value, list):
            return [self._walk_result(item, out) for item in value]
        if isinstance(value, str):
            stripped = value.strip()
            if stripped[:1] in ("{", "["):
                try:
                    parsed = json.loads(stripped)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict | list):
                    walked = (
                        self._walk(parsed, "", out)
                        if isinstance(parsed, dict)
                        else self._walk_result(parsed, out)
                    )
                    return json.dumps(walked, ensure_ascii=False)
            if self.is_credential_value(value):
                out.removed_values.append(value)
                return FILTERED
        return value

    def _walk(self, value: Any, path: str, out: FilteredContext) -> Any:
        if isinstance(value, dict):
            kept: dict[str, Any] = {}
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if self.is_private_key(str(key)) or self._holds_credential(item):
                    out.filtered_fields.append(child)
                    out.removed_values.extend(_string_leaves(item))
                    continue
                kept[str(key)] = self._walk(item, child, out)
            return kept
        if isinstance(value, str) and value.strip()[:1] in ("{", "["):
            return self._walk_result(value, out)  # JSON inside a string (an upstream's text block)
        if isinstance(value, list):
            kept_items = []
            for index, item in enumerate(value):
                child = f"{path}[{index}]"
                if self._holds_credential(item) and not isinstance(item, dict | list):
                    out.filtered_fields.append(child)
                    out.removed_values.extend(_string_leaves(item))
                    continue
                kept_items.append(self._walk(item, child, out))
            return kept_items
        return value

    def _holds_credential(self, value: Any) -> bool:
        return isinstance(value, str) and self.is_credential_value(value)


#: What stands where a removed value was in a tool result.
FILTERED = "[filtered]"


def _scrub(value: Any, removed: list[str]) -> Any:
    """Every string of ``value`` with each removed value replaced by ``[filtered]``."""
    if isinstance(value, str):
        for secret in removed:
            value = value.replace(secret, FILTERED)
        return value
    if isinstance(value, dict):
        return {key: _scrub(item, removed) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item, removed) for item in value]
    return value


def _string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _string_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _string_leaves(item)]
    return [json.dumps(value)] if value is not None else []


def select_slice(context: dict[str, Any], paths: list[str] | None) -> dict[str, Any]:
    """The sub-object holding only the dotted ``paths`` that exist in ``context``."""
    selected: dict[str, Any] = {}
    for path in paths or []:
        parts = path.split(".")
        if not path or any(part == "" for part in parts):
            raise SubagentError("context_slice_invalid", f"minimal_slice path {path!r} is malformed.")
        node: Any = context
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            target = selected
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = node
    return selected


def render_context(value: dict[str, Any]) -> str:
    """The text a subagent is given as context (empty when there is nothing to give)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) if value else ""


def assert_no_leak(prepared: str, removed_values: list[str]) -> None:
    """Fail closed if any removed value reappears in the prepared context."""
    for removed in removed_values:
        if len(removed) >= MIN_CANARY_LENGTH and removed in prepared:
            raise SubagentError(
                "context_privacy_violation",
                "The prepared context contains a value the privacy filter removed; nothing was sent.",
            )


PREPARATION_SYSTEM_PROMPT = (
    "You prepare the context a subagent will receive for its task. Apply the business rules exactly: "
    "keep what they say to keep, drop what they say to drop, and never invent facts. Answer with the "
    "prepared context only, as concise plain text or JSON."
)


def preparation_prompt(task: str, business_rules: str | None, filtered: dict[str, Any]) -> str:
    """The user message of the context-preparation call."""
    rules = business_rules or "Keep only what the task needs."
    return (
        f"Business rules:\n{rules}\n\nSubagent task:\n{task}\n\n"
        f"Parent context (JSON):\n{json.dumps(filtered, ensure_ascii=False, indent=2, sort_keys=True)}"
    )


def subagent_system_prompt(role: str, prepared_context: str) -> str:
    """The system prompt a subagent runs under."""
    prompt = f"Your role: {role}. Work only from the supplied context and the messages you receive."
    if prepared_context:
        prompt += f"\n\nContext:\n{prepared_context}"
    return prompt
