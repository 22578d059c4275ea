"""The request card an MCP Apps host renders beside an approval or input call (docs/apps.md).

One self-contained HTML document: the request page's stylesheet and the card's script inline, nothing
loaded from anywhere (the host runs it in a sandboxed iframe with no network). The script reads the request
through the host (``tools/call`` of the read-only list and status tools) and renders agent text as text only,
never as markup. The card decides nothing: its one action asks the host to open the request's page at
baton's own origin, where a person logs in with a passkey and decides.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from baton import __version__

_HERE = Path(__file__).parent
#: How often the card asks for the request's state while it is pending (the tool result ends the wait).
POLL_MILLISECONDS = 3000


@lru_cache(maxsize=4)
def card_html(decide_base: str | None) -> str:
    """The card, told where baton's request pages are (``None``: no HTTP server, decide on the CLI)."""
    config = {
        "decide_base": decide_base,
        "version": __version__,
        "poll_ms": POLL_MILLISECONDS,
    }
    # JSON in a data block, never executed; "<" escaped so no value can close the element
    data = json.dumps(config, ensure_ascii=False).replace("<", "\\u003c")
    template = (_HERE / "templates" / "card.html").read_text(encoding="utf-8")
    style = (_HERE / "templates" / "request_style.css").read_text(encoding="utf-8")
    script = (_HERE / "static" / "card.js").read_text(encoding="utf-8")
    return (
        template.replace("/*REQUEST_STYLE*/", style)
        .replace("/*CARD_SCRIPT*/", script)
        .replace("{CONFIG}", data)
    )
