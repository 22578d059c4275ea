"""Text from an agent made safe for a terminal: the one sanitizer every printed agent string goes through.

An agent's message, context or name can carry ESC sequences (erase the line, move the cursor, set the
window title), BEL, CR, C1 controls or bidi overrides (RLO) that a terminal emulator obeys, so a person
approving ``DROP DATABASE prod`` could see only a routine line drawn over it. Every such character is
shown as its escape (``\\x1b``, ``\\u202e``) rather than dropped, so the person sees that something was
hidden. Standard library only: ``baton serve``'s stderr line imports it without rich.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

#: Unicode categories a terminal may act on: controls, formats (bidi, zero-width), surrogates, private,
#: unassigned, and the line and paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


#: The usual short escapes, easier to read than their codes.
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` on one line, every control, format or separator character (ESC, CR, LF, RLO) escaped."""
    return "".join(_escape(char) if _hidden(char) else char for char in text)


def printable_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON whose strings hold no character a terminal acts on (still valid JSON, same data).

    ``json.dumps`` escapes C0 controls itself (so a line break left is the layout's); DEL, C1 controls and
    bidi overrides are escaped here."""
    text = json.dumps(value, ensure_ascii=False, default=str, indent=indent)
    return "".join(_json_escape(char) if _hidden(char) and ord(char) >= 0x7F else char for char in text)


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def printable_value(value: Any) -> str:
    """A table cell from any value: structures as one-line JSON, everything as :func:`printable`."""
    if isinstance(value, dict | list):
        return printable(json.dumps(value, ensure_ascii=False, default=str))
    return printable(str(value))
