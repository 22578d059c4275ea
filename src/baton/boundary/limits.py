"""Caps on what a caller may send: tool names, tool arguments by serialized size, list pages, contexts in lists.

A tool name longer than ``MAX_TOOL_NAME_CHARS`` (128, the MCP spec's bound, SEP-986) is refused before
anything else sees it: no receipt, no metric, no trace attribute holds it.

Every free-form argument (a context, a task, a message, a webhook payload, a timer action …) is
measured once, at the tool boundary, on the raw arguments before any validation: a call whose
arguments serialize to more than ``BATON_MAX_ARGUMENT_BYTES`` (default 256 KiB) is refused at once
with ``argument_too_large``, naming the largest field. The walk stops as soon as the budget is spent,
so a 50 MB string costs one pass over at most the limit, not a copy of the whole value.
"""

from __future__ import annotations

from typing import Any

from baton.errors import ArgumentError, ToolNameError

#: The longest tool name a ``tools/call`` may carry (the MCP spec's 1-128 characters).
MAX_TOOL_NAME_CHARS = 128
#: Default of ``BATON_MAX_ARGUMENT_BYTES``: the serialized size of one call's arguments.
DEFAULT_MAX_ARGUMENT_BYTES = 256 * 1024
#: A request context larger than this is left out of ``mcp_list_pending_requests`` (``context_truncated``).
LIST_CONTEXT_BYTES = 8 * 1024
#: Default and largest page of ``mcp_list_subagents``.
DEFAULT_PAGE = 50
MAX_PAGE = 200


class _OverBudgetError(Exception):
    """Raised inside the walk when the size budget is spent."""


def json_size(value: Any, budget: int) -> int:
    """An upper-bound estimate of ``value``'s UTF-8 JSON size; raises :class:`_OverBudgetError` past ``budget``.

    Strings count their UTF-8 bytes plus quotes and one escape byte per control or quote character
    (close enough: the cap is about orders of magnitude, not exact bytes). Iterative, so deep nesting
    cannot exhaust the stack.
    """
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += _str_size(item, budget - total)
        elif isinstance(item, dict):
            total += 2 + len(item)
            for key, nested in item.items():
                stack.append(nested)
                total += _str_size(str(key), budget - total) + 1
        elif isinstance(item, list | tuple):
            total += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += _int_size(item)
        else:
            total += len(repr(item))
        if total > budget:
            raise _OverBudgetError
    return total


def _str_size(text: str, budget: int) -> int:
    if len(text) > budget:  # every character is at least one byte
        raise _OverBudgetError
    return len(text.encode("utf-8", errors="surrogatepass")) + 2


def _int_size(number: int) -> int:
    bits = abs(number).bit_length()
    return max(1, bits * 3 // 10 + 2)  # decimal digits, without building a (possibly huge) string


def check_tool_name(name: object) -> None:
    """Refuse a tool name longer than :data:`MAX_TOOL_NAME_CHARS` with ``tool_name_too_long`` (never echoed)."""
    if isinstance(name, str) and len(name) > MAX_TOOL_NAME_CHARS:
        raise ToolNameError(
            "tool_name_too_long",
            f"Tool names have at most {MAX_TOOL_NAME_CHARS} characters; this one has {len(name)}.",
            limit_chars=MAX_TOOL_NAME_CHARS,
        )


def check_arguments(arguments: dict[str, Any], limit: int) -> None:
    """Refuse arguments whose serialized size exceeds ``limit`` with ``argument_too_large`` naming the field."""
    try:
        json_size(arguments, limit)
    except _OverBudgetError:
        pass
    else:
        return
    sizes: dict[str, int] = {}
    for key, value in arguments.items():
        try:
            sizes[str(key)] = json_size(value, limit)
        except _OverBudgetError:
            sizes[str(key)] = limit + 1
    field = max(sizes, key=lambda name: sizes[name]) if sizes else "(arguments)"
    raise ArgumentError(
        "argument_too_large",
        f"The argument {field!r} is too large: one call's arguments may serialize to at most {limit} bytes "
        "(BATON_MAX_ARGUMENT_BYTES). Send a reference or a summary instead.",
        field=field,
        limit_bytes=limit,
    )


def fits(value: Any, limit: int) -> bool:
    """Whether ``value`` serializes to at most ``limit`` bytes."""
    try:
        json_size(value, limit)
    except _OverBudgetError:
        return False
    return True
