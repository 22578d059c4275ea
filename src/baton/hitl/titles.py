"""A request's title: its markdown message as one line of plain text, the same in every list (the inbox,
the console, ``baton hitl list`` and ``watch``) and on ``baton serve``'s stderr line.

One converter: markdown-it-py renders the message (raw HTML off), nh3 strips every tag, the entities are
decoded and the whitespace collapsed, so ``**Deploy** the [release](http://x)`` reads "Deploy the release".
markdown-it-py and nh3 are imported on first use, never at import: ``baton serve`` loads this module to
announce requests and must answer ``initialize`` fast.
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any

from baton.terminal_text import printable

#: The closing tags that end a block or a cell: each becomes a space, so two paragraphs do not run together.
_BLOCK_ENDS = re.compile(r"<(?:/p|/li|/h\d|br ?/?|/tr|/td|/th|/blockquote|hr ?/?)>")
#: What markdown itself reads as layout (a line break, a tab); every other hidden character is escaped.
_LAYOUT = frozenset("\n\t")


@cache
def _parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def plain(text: str) -> str:
    """A markdown message as one line of plain text for a list's title (``**Deploy**`` reads "Deploy");
    a plain string, so a template escapes it like any agent text."""
    import nh3

    spaced = _BLOCK_ENDS.sub(" ", _parser().render(text))
    return " ".join(html.unescape(nh3.clean(spaced, tags=set())).split())


def terminal_title(message: str) -> str:
    """The title a terminal shows: :func:`plain`, every character a terminal acts on escaped both before
    the markdown is read (a CR is shown, not folded into a space) and after (an entity cannot decode into a
    live RLO)."""
    source = "".join(char if char in _LAYOUT else printable(char) for char in message)
    return printable(plain(source))
