"""Tool-poisoning checks at replay: what a server's tool definitions say to the model, not to the user.

A pinned contract stops a server from changing after review (a rug pull); it does not stop one that was
poisoned from its first version. Every tool's name, title, description and every string in its schemas
is scanned. Each finding is typed (``kind``), has a stable ``id`` (the same text gives the same id at
every replay) and is receipted; ``promote`` refuses (``mcp_tool_poisoning_suspected``) until each one is
accepted by id. The pattern set is maintained in ``poisoning_rules`` and listed in docs/gateway.md.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from baton.gateway.replay.poisoning_rules import (
    AUTHORITY_BANNER,
    HIDDEN_CHARACTERS,
    MODEL_INSTRUCTION_PATTERNS,
    PREFERENCE_PATTERNS,
    name_core,
)

_INSTRUCTIONS = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in MODEL_INSTRUCTION_PATTERNS]
_PREFERENCES = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in PREFERENCE_PATTERNS]

#: A description (or title) longer than this is a finding: room for a prompt the user never reads.
MAX_DESCRIPTION_CHARS = 4096

#: baton's own tools (a test compares this with the registry); an upstream tool named like one
#: (with or without ``mcp_``) shadows it in the model's eyes.
BUILTIN_TOOLS = frozenset(
    {
        "mcp_cancel_subagent",
        "mcp_cancel_timer",
        "mcp_get_request_status",
        "mcp_get_subagent_status",
        "mcp_list_adapters",
        "mcp_list_pending_requests",
        "mcp_list_subagents",
        "mcp_list_timers",
        "mcp_notification_channels",
        "mcp_ping",
        "mcp_request_admin_approval",
        "mcp_request_admin_input",
        "mcp_respond_to_request",
        "mcp_send_discord_message",
        "mcp_send_email",
        "mcp_send_message_to_subagent",
        "mcp_send_slack_message",
        "mcp_send_telegram_message",
        "mcp_send_webhook",
        "mcp_set_timer",
        "mcp_spawn_subagent",
        "mcp_wait_for_request",
    }
)


def _finding(kind: str, tool: str, where: str, detail: str) -> dict[str, Any]:
    digest = hashlib.sha256(f"{kind}\0{tool}\0{where}\0{detail}".encode()).hexdigest()[:12]
    return {"id": f"{kind}-{digest}", "kind": kind, "tool": tool, "where": where, "detail": detail}


def _texts(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a definition (keys of schema properties too), with where it sits."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(str(key), f"{where}.{key}#key")
            yield from _texts(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{where}[{index}]")


def _hidden(text: str) -> str | None:
    found = sorted({f"U+{ord(c):04X}" for c in HIDDEN_CHARACTERS.findall(text)})
    return ", ".join(found[:8]) if found else None


#: Other live adapters' tools: ``(adapter id, tool)`` pairs, or (as the survey data has it) tool → adapter.
OtherTools = Mapping[str, str] | Iterable[tuple[str, str]]


def _owners(other_tools: OtherTools | None, adapter_id: str) -> list[tuple[str, str]]:
    """The ``(adapter, tool)`` pairs of every adapter but ``adapter_id``."""
    pairs = (
        [(a, n) for n, a in other_tools.items()] if isinstance(other_tools, Mapping) else other_tools or []
    )
    return [(a, n) for a, n in pairs if a != adapter_id]


def _by_name(owners: list[tuple[str, str]]) -> dict[str, str]:
    """Each tool name of the other adapters → the adapters that have it, named in one string."""
    found: dict[str, set[str]] = {}
    for other, name in owners:
        found.setdefault(name, set()).add(other)
    return {name: ", ".join(sorted(adapters)) for name, adapters in found.items()}


def name_findings(
    definitions: list[dict[str, Any]], *, adapter_id: str, other_tools: OtherTools | None = None
) -> list[dict[str, Any]]:
    """Only the shadowing findings (a tool named like baton's own or another live adapter's): what can
    change after replay, when another adapter goes live; checked again at promote and at every start."""
    builtin = BUILTIN_TOOLS | {name.removeprefix("mcp_") for name in BUILTIN_TOOLS}
    owners = _owners(other_tools, adapter_id)
    found = [f for d in definitions for f in _name_findings(str(d.get("name")), builtin, owners)]
    return sorted({f["id"]: f for f in found}.values(), key=lambda f: (f["tool"], f["kind"], f["where"]))


def shadow_finding_id(tool: str, other_adapter: str) -> str:
    """The id of the finding "``tool`` shadows the live adapter ``other_adapter``'s ``tool``"."""
    return str(_shadow_finding(tool, other_adapter)["id"])


def scan(
    definitions: list[dict[str, Any]],
    *,
    adapter_id: str,
    other_tools: OtherTools | None = None,
) -> list[dict[str, Any]]:
    """The findings over one server's tool definitions, against the other live adapters' tools, keyed by
    adapter and tool (two live adapters with one tool name are two findings, never one overwriting the other)."""
    owners = _owners(other_tools, adapter_id)
    by_name = _by_name(owners)
    builtin = BUILTIN_TOOLS | {name.removeprefix("mcp_") for name in BUILTIN_TOOLS}
    own = {str(d.get("name")) for d in definitions}
    alike = _by_core(own, by_name)
    findings: list[dict[str, Any]] = []
    for definition in definitions:
        name = str(definition.get("name"))
        findings += _name_findings(name, builtin, owners)
        findings += _imitation_findings(name, alike)
        findings += _size_findings(name, definition)
        for where, text in _texts({k: v for k, v in definition.items() if k != "annotations"}, name):
            findings += _text_findings(name, where, text, by_name, own)
    unique = {f["id"]: f for f in findings}
    return sorted(unique.values(), key=lambda f: (f["tool"], f["kind"], f["where"]))


def _shadow_finding(name: str, other_adapter: str) -> dict[str, Any]:
    return _finding("name_shadows_adapter_tool", name, "name", f"the live adapter {other_adapter} has {name}")


def _name_findings(
    name: str, builtin: frozenset[str], owners: list[tuple[str, str]]
) -> Iterator[dict[str, Any]]:
    """A tool named like baton's own or like another live adapter's shadows it (one finding per adapter)."""
    if name in builtin or name.startswith("mcp_"):
        yield _finding("name_shadows_builtin", name, "name", f"{name} looks like baton's own tool")
    for other in sorted({a for a, n in owners if n == name}):
        yield _shadow_finding(name, other)


def _by_core(own: set[str], by_name: dict[str, str]) -> dict[str, dict[str, str]]:
    """Every tool name in view, grouped by what it claims to do (``name_core``), with where it is
    (``by_name``: each other live adapter's tool name → the adapters that have it)."""
    where = {n: f"the live adapter {a}" for n, a in by_name.items()} | dict.fromkeys(own, "this server")
    groups: dict[str, dict[str, str]] = {}
    for name, place in where.items():
        groups.setdefault(name_core(name), {})[name] = place
    return groups


def _imitation_findings(name: str, alike: dict[str, dict[str, str]]) -> Iterator[dict[str, Any]]:
    """A tool named like another once case, decoration ("best_", "_advanced") and verb synonyms are set
    aside: function overlapping, a lookalike the model may pick instead."""
    core = name_core(name)
    for other, where in sorted(alike.get(core, {}).items()):
        if other != name and core:
            yield _finding("imitates_tool", name, "name", f"named like {other} of {where}")


def _size_findings(name: str, definition: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A title or description too long for a user to read is room for a hidden prompt."""
    for field in ("title", "description"):
        text = definition.get(field)
        if isinstance(text, str) and len(text) > MAX_DESCRIPTION_CHARS:
            yield _finding("oversized_description", name, field, f"{len(text)} characters")


def _text_findings(
    name: str, where: str, text: str, other_tools: dict[str, str], own: set[str]
) -> Iterator[dict[str, Any]]:
    """Hidden characters, instructions to the model, and (outside keys and the name) references to other tools."""
    hidden = _hidden(text)
    if hidden:
        yield _finding("hidden_unicode", name, where, hidden)
    visible = unicodedata.normalize("NFKC", HIDDEN_CHARACTERS.sub("", text))
    for pattern_name, pattern in _INSTRUCTIONS:
        match = pattern.search(visible)
        if match:
            yield _finding("model_instruction", name, where, f"{pattern_name}: {match.group(0)[:80]}")
    banner = AUTHORITY_BANNER.search(visible)
    if banner:
        yield _finding("model_instruction", name, where, f"authority_banner: {banner.group(0)[:80]}")
    for pattern_name, pattern in _PREFERENCES:
        match = pattern.search(visible)
        if match:
            yield _finding("preference_manipulation", name, where, f"{pattern_name}: {match.group(0)[:80]}")
    if where.endswith("#key") or where == f"{name}.name":
        return
    yield from _reference_findings(name, where, visible, other_tools, own)


def _reference_findings(
    name: str, where: str, visible: str, other_tools: dict[str, str], own: set[str]
) -> Iterator[dict[str, Any]]:
    """Words of ``visible`` that name an adapter tool, one of baton's, or another live adapter's."""
    for word in sorted(set(re.findall(r"[A-Za-z0-9][A-Za-z0-9_-]*", visible))):
        if "__" in word and not word.startswith("__"):
            yield _finding("tool_reference", name, where, f"names the adapter tool {word}")
        elif word in BUILTIN_TOOLS:
            yield _finding("tool_reference", name, where, f"names baton's tool {word}")
        elif word in other_tools and word not in own and ("_" in word or "-" in word):
            yield _finding("tool_reference", name, where, f"names {word} of the adapter {other_tools[word]}")
