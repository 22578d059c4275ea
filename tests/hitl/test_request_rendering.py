"""What the request page renders of an agent's text, over real HTTP from the inbox on 127.0.0.1: markdown
through markdown-it-py and nh3 with nothing executable left, plain text with its line breaks, long values
that wrap, and who asked."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest

from baton.config import load_settings
from baton.hitl.broker import get_broker
from baton.hitl.records import NewRequest
from baton.runtime import Runtime
from tests.hitl.test_inbox import TOKEN, Clients, _create, _serving

HOSTILE = """# Deploy notes

<script>window.pwned = 1</script>

<img src=x onerror="window.pwned = 2">

- [the runbook](https://example.com/runbook)
- [click me](javascript:alert(1))
- [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
- <a href="javascript:alert(2)" onclick="alert(3)">raw link</a>

**bold** <iframe src="https://evil.example"></iframe>
"""
SQL = """UPDATE accounts SET frozen = true WHERE id = 1;
UPDATE accounts SET frozen = true WHERE id = 2;
UPDATE accounts SET frozen = true WHERE id = 3;
UPDATE accounts SET frozen = true WHERE id = 4;
UPDATE accounts SET frozen = true WHERE id = 5;
UPDATE accounts SET frozen = true WHERE id = 6;"""


@pytest.fixture
def token_runtime(baton_env: dict[str, str]) -> Iterator[Runtime]:
    rt = Runtime.open(load_settings({**baton_env, "BATON_ADMIN_TOKEN": TOKEN}))
    yield rt
    rt.close()


@pytest.fixture
def token_inbox(token_runtime: Runtime) -> Iterator[tuple[str, Clients]]:
    with _serving(token_runtime) as served:
        yield served


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes, and the scripts' sources."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(html)
    return parser.tags


def _page(token_runtime: Runtime, token_inbox: tuple[str, Clients], new: NewRequest) -> str:
    request_id = _create(get_broker(token_runtime), new)
    _, make_client = token_inbox
    client = make_client()
    client.post("/inbox/login", data={"token": TOKEN})
    page = client.get(f"/inbox/requests/{request_id}")
    assert page.status_code == 200
    return page.text


def test_markdown_context_renders_with_nothing_executable(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    html = _page(
        token_runtime, token_inbox, NewRequest("approval", "Ship it?", {"notes": HOSTILE}, 600, agent="bot")
    )
    tags = elements(html)
    scripts = sorted(str(attrs.get("src")) for tag, attrs in tags if tag == "script")
    # the page's own files only
    assert scripts == ["/inbox/static/countdown.js", "/inbox/static/live.js", "/inbox/static/passkey.js"]
    shown = elements(html.split("<main>", 1)[1])  # what the request put on the page
    assert not [tag for tag, _ in shown if tag in ("script", "iframe", "img", "object", "embed", "style")]
    handlers = [(tag, name) for tag, attrs in tags for name in attrs if name.startswith("on")]
    assert handlers == []
    hrefs = [attrs.get("href") or "" for tag, attrs in shown if tag == "a"]
    assert "https://example.com/runbook" in hrefs
    assert not [href for href in hrefs if not href.startswith(("/", "https://", "http://"))]
    # rendered: a heading, bold text and a list; the source stays readable (escaped) one click away
    assert "<h1>Deploy notes</h1>" in html and "<strong>bold</strong>" in html
    assert "markdown source" in html and "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert "<script>window.pwned" not in html


def test_plain_text_keeps_its_line_breaks_and_long_values_can_wrap(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    digest = "9f2c" * 16
    html = _page(
        token_runtime,
        token_inbox,
        NewRequest(
            "approval",
            "Freeze six accounts?\nThe fraud model flagged them.",
            {"statements": SQL, "bundle_sha256": digest},
            600,
            agent="bot",
        ),
    )
    assert f'<div class="rq-text">{SQL}</div>' in html  # shown as written: white-space: pre-wrap
    assert '<div class="rq-text">Freeze six accounts?\nThe fraud model flagged them.</div>' in html
    assert ".rq-text { white-space: pre-wrap; }" in html
    assert ".rq, .rq * { overflow-wrap: anywhere; }" in html
    assert f'<div class="rq-text">{digest}</div>' in html
    assert "<h1>" not in html.split("<main>", 1)[1]  # no markdown sign, no markdown


def test_who_asked_is_what_the_server_recorded_not_what_the_context_claims(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    forged: dict[str, Any] = {"adapter_id": "payments", "tool": "refund", "risk_class": "low"}
    html = _page(
        token_runtime,
        token_inbox,
        NewRequest("approval", "Refund?", forged, 600, agent="bot", provenance={"client": "claude-code"}),
    )
    assert '<b id="agent">bot</b>' in html and '<b id="client">claude-code</b>' in html
    assert 'id="risk-class"' not in html  # a context's risk_class is the agent's word, not the gateway's
    assert "The agent's own request (not a governed tool call)" in html
