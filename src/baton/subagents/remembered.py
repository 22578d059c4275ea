"""What the privacy filter removed for one spawn, removed again wherever it appears later.

A spawn's removed values can number in the tens of thousands (a private column of a large sheet), and
every later tool result is searched for all of them: they are matched in one pass per string by one
regular expression shaped as a trie of the values (shared prefixes are tried once), rebuilt only when
values were added.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from baton.subagents.tables import FILTERED

#: Removed string values shorter than this are not searched for in other text (too many false hits).
MIN_CANARY_LENGTH = 6

#: A removed value at least this long is also removed where a whole string (a table's cell) equals it.
MIN_CELL_LENGTH = 4

#: Removed values never searched for again: they say nothing private (a removed ``has_password: true``).
UNREMARKABLE = frozenset({FILTERED, "true", "false", "null", "None", "True", "False"})

#: Values longer than this are searched for one by one (a trie that deep would be a deep pattern).
MAX_TRIE_LENGTH = 200


@dataclass
class Remembered:
    """The values the filter removed for one spawn (from its parent context, then from each tool result),
    removed again wherever they appear later: in the task, a follow-up message, any later tool result."""

    values: set[str] = field(default_factory=set)
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)
    _long: list[str] = field(default_factory=list, repr=False)
    _built_for: int = field(default=-1, repr=False)

    def add(self, values: Iterable[str]) -> None:
        """Remember ``values``, and the escaped forms they take in JSON, CSV and Python text."""
        for value in values:
            if len(value) < MIN_CELL_LENGTH or value in UNREMARKABLE:
                continue
            self.values.add(value)
            self.values.update(
                variant
                for variant in (
                    json.dumps(value)[1:-1],
                    json.dumps(value, ensure_ascii=False)[1:-1],
                    value.replace('"', '""'),
                    repr(value)[1:-1],
                )
                if len(variant) >= MIN_CANARY_LENGTH
            )

    def scrub(self, value: Any) -> Any:
        """``value`` with every remembered value replaced by ``[filtered]`` in each of its strings."""
        if not self.values:
            return value
        self._build()
        return self._scrub(value)

    def _build(self) -> None:
        """The trie pattern of the values long enough to search inside text (when values were added)."""
        if self._built_for == len(self.values):
            return
        inside = [v for v in self.values if len(v) >= MIN_CANARY_LENGTH]
        short = [v for v in inside if len(v) <= MAX_TRIE_LENGTH]
        self._pattern = re.compile(trie_pattern(short)) if short else None
        self._long = sorted((v for v in inside if len(v) > MAX_TRIE_LENGTH), key=len, reverse=True)
        self._built_for = len(self.values)

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            if value in self.values:
                return FILTERED
            for secret in self._long:
                value = value.replace(secret, FILTERED)
            return self._pattern.sub(FILTERED, value) if self._pattern is not None else value
        if isinstance(value, dict):
            return {key: self._scrub(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._scrub(item) for item in value]
        return value


def trie_pattern(words: Iterable[str]) -> str:
    """One regular expression matching any of ``words``, the longest at each place (built as a trie)."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, Any]) -> str:
    """The pattern of a trie node (recursion depth is the longest word, at most ``MAX_TRIE_LENGTH``)."""
    branches = [re.escape(char) + _node_pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word ends here, and longer ones go on: the longer first (greedy)
        return f"(?:{body})?"
    return body


#: The parts of a model request that carry text the model is sent (what a spawn removed never stays in).
SCRUBBED_PARTS = ("system-prompt", "user-prompt", "tool-return", "retry-prompt")


def scrub_requests(messages: list[Any], remembered: Remembered) -> None:
    """Remove every value the spawn's filter removed from what the next model request sends, in place (a
    last net under the per-result filter: the task, a message, a tool's return, a retry prompt)."""
    if not remembered.values:
        return
    for message in messages:
        if getattr(message, "kind", None) != "request":
            continue
        for part in message.parts:
            if getattr(part, "part_kind", None) in SCRUBBED_PARTS and isinstance(
                part.content, str | list | dict
            ):
                part.content = remembered.scrub(part.content)
