"""Context strategies and the privacy filter that runs before any model sees anything.

The filter removes keys that name private data, the cells of table columns whose header names private
data (:mod:`baton.subagents.tables`, :mod:`baton.subagents.text_tables`) and values shaped like
credentials; a value it removed is removed wherever else it appears, for the rest of the spawn
(:class:`Remembered`). After an
``llm_generated`` preparation, none of the removed values may appear in the prepared text:
if one does, the spawn fails closed with ``context_privacy_violation``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from baton.errors import SubagentError
from baton.evidence.receipts import CREDENTIAL_PATTERN
from baton.subagents.remembered import MIN_CANARY_LENGTH, MIN_CELL_LENGTH, Remembered
from baton.subagents.tables import (
    FILTERED,
    Removed,
    filter_addressed,
    filter_cells,
    filter_columnar,
    filter_named_entry,
    filter_rows,
)
from baton.subagents.text_pairs import filter_pairs
from baton.subagents.text_tables import filter_text

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

#: Text longer than this is not searched for JSON inside it; nor more brackets than the next limit tried.
MAX_EMBEDDED_CHARS = 1_000_000
MAX_EMBEDDED_ATTEMPTS = 2_000
BRACKET = re.compile(r"[\[{]")

#: Text longer than this is not parsed as a Python literal (a server that prints ``repr`` of its rows).
MAX_LITERAL_CHARS = 1_000_000


@dataclass
class FilteredContext:
    """The context after the privacy filter, with what was removed."""

    value: dict[str, Any]
    filtered_fields: list[str] = field(default_factory=list)
    removed_values: list[str] = field(default_factory=list)

    def take(self, removed: Removed) -> None:
        """Add what a table's filtering removed."""
        self.removed_values.extend(removed.values)
        self.filtered_fields.extend(removed.fields)

    def remembered(self) -> Remembered:
        """What the spawn remembers of it: the values removed, to remove wherever they appear again."""
        remembered = Remembered()
        remembered.add(self.removed_values)
        return remembered


@dataclass(frozen=True)
class PrivacyFilter:
    """Removes private keys, the cells of private columns and credential-shaped values."""

    key_fragments: tuple[str, ...] = DEFAULT_PRIVATE_KEY_FRAGMENTS
    sensitive_values: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, extra_fragments: str | None, sensitive_values: Iterable[str]) -> PrivacyFilter:
        """The default fragments plus ``BATON_PRIVATE_KEYS`` (comma-separated)."""
        extra = tuple(f.strip().lower() for f in (extra_fragments or "").split(",") if f.strip())
        return cls(DEFAULT_PRIVATE_KEY_FRAGMENTS + extra, tuple(sensitive_values))

    def is_private_key(self, key: str) -> bool:
        """Whether a key (or a column's name: ``Private Notes``, ``creditCard``) names private data."""
        return _names_private(self.key_fragments, key)

    def is_credential_value(self, value: str) -> bool:
        """Whether a string looks like (or is) a credential."""
        if any(pattern.search(value) for pattern in CREDENTIAL_VALUE_PATTERNS):
            return True
        return any(len(s) >= 8 and s in value for s in self.sensitive_values)

    def apply(self, context: dict[str, Any] | None) -> FilteredContext:
        """Filter a parent context (``None`` is an empty context); a removed value is removed from the
        rest of it too."""
        result = FilteredContext(value={})
        walked = self._walk(context or {}, "", result)
        result.value = result.remembered().scrub(walked)
        return result

    def filter_result(self, value: Any, remembered: Remembered | None = None) -> Any:
        """A tool's result as a model may see it: private keys, private columns and credential-shaped
        values removed, in JSON and in text (a JSON or Python literal, CSV, a markdown table); then no
        value removed here or before for the spawn (``remembered``) is left in any string."""
        out = FilteredContext(value={})
        cleaned = self._walk_result(value, out, "")
        remembered = remembered if remembered is not None else Remembered()
        remembered.add(out.removed_values)
        return remembered.scrub(cleaned)

    def _walk_result(self, value: Any, out: FilteredContext, path: str) -> Any:
        if isinstance(value, dict):
            return self._walk(value, path, out)
        if isinstance(value, list):
            value = self._tables(value, path, out)
            return [self._walk_result(item, out, f"{path}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, str):
            if value == FILTERED or len(value) < MIN_CELL_LENGTH:
                return value
            parsed = _parsed(value)
            if parsed is not None:
                walked = self._walk_result(parsed, out, path)
                return json.dumps(walked, ensure_ascii=False, default=str)
            if self.is_credential_value(value):
                out.removed_values.append(value)
                return FILTERED
            return self._tables(self._embedded(value, out, path), path, out)
        return value

    def _embedded(self, text: str, out: FilteredContext, path: str) -> str:
        """JSON objects and arrays inside text (``Result: [["customer", ...]]``), each through the filter."""
        if len(text) > MAX_EMBEDDED_CHARS or ("{" not in text and "[" not in text):
            return text
        decoder, pieces, last, attempts = json.JSONDecoder(), [], 0, 0
        bracket = BRACKET.search(text)
        while bracket is not None and attempts < MAX_EMBEDDED_ATTEMPTS:
            attempts += 1
            start, resume = bracket.start(), bracket.start() + 1
            try:
                found, end = decoder.raw_decode(text, start)
            except ValueError:
                found, end = None, start
            if isinstance(found, dict | list) and found:
                walked = self._walk_result(found, out, path)
                if walked != found:
                    pieces += [text[last:start], json.dumps(walked, ensure_ascii=False)]
                    last = end
                resume = end
            bracket = BRACKET.search(text, resume)
        return "".join(pieces) + text[last:] if pieces else text

    def _walk(self, value: Any, path: str, out: FilteredContext) -> Any:
        if isinstance(value, dict):
            value = self._tables(value, path, out)
            kept: dict[str, Any] = {}
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if self.is_private_key(str(key)) or self._holds_credential(item):
                    out.filtered_fields.append(child)
                    out.removed_values.extend(_string_leaves(item))
                    continue
                kept[str(key)] = self._walk(item, child, out)
            return kept
        if isinstance(value, str):
            return self._walk_result(value, out, path)  # JSON or a table inside a string
        if isinstance(value, list):
            value = self._tables(value, path, out)
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

    def _tables(self, value: Any, path: str, out: FilteredContext) -> Any:
        """``value`` with the cells under a private header cell filtered (see :mod:`.tables`)."""
        removed = Removed()
        private = self.is_private_key
        if isinstance(value, dict):
            value = filter_columnar(value, private, removed, path)
            value = filter_addressed(value, private, removed, path)
            value = filter_named_entry(value, private, removed, path)
        elif isinstance(value, list):
            value = filter_cells(filter_rows(value, private, removed, path), private, removed, path)
        elif isinstance(value, str):
            value = filter_pairs(filter_text(value, private, removed), private, removed)
        out.take(removed)
        return value

    def _holds_credential(self, value: Any) -> bool:
        return isinstance(value, str) and self.is_credential_value(value)


@lru_cache(maxsize=65_536)
def _names_private(fragments: tuple[str, ...], key: str) -> bool:
    """Whether ``key`` contains a fragment, as written or as words (cached: a table repeats its cells)."""
    lowered = key.lower().replace("-", "_")
    words = re.sub(r"[^a-z0-9]+", "_", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).lower())
    return any(fragment in lowered or fragment in words for fragment in fragments)


def _parsed(text: str) -> dict[str, Any] | list[Any] | None:
    """The object or array a text holds as JSON, or as a Python literal (``str(rows)``); else None."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]") or stripped == FILTERED:
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        if len(stripped) > MAX_LITERAL_CHARS:
            return None
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return parsed if isinstance(parsed, dict | list) else None


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
