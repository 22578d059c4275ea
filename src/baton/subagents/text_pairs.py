"""Values labelled in text through the privacy filter: a label that names private data hides its value.

Servers that answer in text label values in many ways: ``Private notes: ...`` lines (and a YAML block
under ``private_notes:``), ``"secret": "..."`` or ``'secret': '...'`` inside text that is not a whole
JSON or Python literal, ``api_key=...`` pairs (logfmt, query strings, XML attributes) and
``<password>...</password>`` elements. Each value becomes :data:`~baton.subagents.tables.FILTERED` and is
returned as removed, so the filter removes it wherever else it appears.
"""

from __future__ import annotations

import re

from baton.subagents.tables import FILTERED, Private, Removed, names_private

#: A line that labels a value: ``Private notes: ...``, ``- api_key = ...``, ``"secret": "...",``.
LABELLED = re.compile(
    r"""^(\s*(?:[-*•]\s+)?["'`]?)([^:=\n"'`]{1,64}?)(["'`]?\s*[:=]\s*)(.*?\S)?(\s*,?\s*)$"""
)

#: ``"label": value`` or ``'label': value`` anywhere in a line (a JSON or Python fragment).
QUOTED_PAIR = re.compile(
    r"""(["'])([^"'\n]{1,64})\1(\s*:\s*)("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^,}\]\s][^,}\]\n]*)"""
)

#: ``label=value`` (logfmt, a query string, an XML attribute).
EQUALS_PAIR = re.compile(
    r"""(?<![\w.-])([A-Za-z_][\w.-]{0,63})(\s*=\s*)("[^"\n]*"|'[^'\n]*'|[^\s,;&"'<>]+)"""
)

#: ``<label ...>value</label>``.
ELEMENT = re.compile(r"(?s)<([A-Za-z_][\w.:-]{0,63})(\s[^>]*)?>([^<]*)</\1\s*>")


def filter_pairs(text: str, private: Private, removed: Removed) -> str:
    """``text`` with every value labelled private filtered (``text`` itself if none)."""
    lines = text.split("\n")
    changed = _labelled(lines, private, removed)
    out = "\n".join(lines) if changed else text

    def hide(match: re.Match[str], label: str, value: str, keep: str, quote: bool) -> str:
        if (
            not names_private(label, private)
            or FILTERED in value
            or not value.strip("\"' ")
            or value[:1] in "{["
        ):
            return match.group(0)
        removed.take(value.strip().strip("\"'"))
        return keep + (f'"{FILTERED}"' if quote and value[:1] in "\"'" else FILTERED)

    out = QUOTED_PAIR.sub(
        lambda m: hide(m, m.group(2), m.group(4), m.group(0)[: m.start(4) - m.start(0)], True), out
    )
    out = EQUALS_PAIR.sub(lambda m: hide(m, m.group(1), m.group(3), m.group(1) + m.group(2), True), out)
    return ELEMENT.sub(
        lambda m: (
            m.group(0)
            if not names_private(m.group(1), private) or not m.group(3).strip() or FILTERED in m.group(3)
            else _element(m, removed)
        ),
        out,
    )


def _element(match: re.Match[str], removed: Removed) -> str:
    removed.take(match.group(3).strip())
    return f"<{match.group(1)}{match.group(2) or ''}>{FILTERED}</{match.group(1)}>"


def _labelled(lines: list[str], private: Private, removed: Removed) -> bool:
    """``label: value`` lines whose label names private data: the value; a label alone on its line: the
    lines indented under it (a YAML block)."""
    changed, block = False, None
    for number, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if block is not None and line.strip() and indent > block:
            if FILTERED not in line:
                removed.take(line.strip().lstrip("-* ").strip())
                lines[number] = line[:indent] + FILTERED
                changed = True
            continue
        block = None
        match = LABELLED.match(line)
        if match is None or not names_private(match.group(2), private):
            continue
        value = match.group(4) or ""
        if not value.strip("\"'`|>-{[ "):
            block = indent if value.strip() in ("", "|", ">", "|-", ">-") else None
            continue  # nothing on the line (a block follows), or a JSON object or array opens here
        if FILTERED in value:
            continue
        removed.take(value.strip().strip("\"'`"))
        lines[number] = match.group(1) + match.group(2) + match.group(3) + FILTERED + match.group(5)
        changed = True
    return changed
