"""Every inbox and console page, rendered by a real ``baton serve --http`` over real HTTP, shows text and
never a Python object or template syntax; list titles are plain text from the markdown, still escaped;
every end page says what happened and what to do next (issue 44)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from baton.config import load_settings
from baton.hitl.broker import Decision, HitlBroker, NewRequest
from baton.identity.links import LinkSigner, load_secret
from tests.cli_process import run_cli

ADMIN_TOKEN = "end-pages-admin-token-0123456789abcdef"
#: What a page must never show: a Python object's repr (as sent, or HTML-escaped), or template syntax.
LEAKS = re.compile(r"(?:<|&lt;|&#60;)(?:function|bound method) | object at 0x|\{\{|\{%|\}\}|%\}")

pytestmark = pytest.mark.anyio


@pytest.fixture
def served(baton_env: dict[str, str], http_server_factory: Any) -> Iterator[tuple[httpx.Client, str]]:
    """A real server and a client that speaks to it as the operator (bearer admin token)."""
    env = {**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    base = http_server_factory(env).base_url
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        yield client, base


def _clean(response: httpx.Response) -> str:
    """The page's text, asserted free of a Python object or template syntax."""
    leak = LEAKS.search(response.text)
    assert leak is None, (str(response.url), leak.group(0), response.text[leak.start() - 200 : leak.end()])
    return response.text


def _link(baton_env: dict[str, str], request_id: str, expires_epoch: float) -> str:
    signer = LinkSigner(load_secret(load_settings({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN})))
    return "/inbox/link?" + urlencode(signer.link_params(request_id, expires_epoch))


def _decide(client: httpx.Client, request_id: str, action: str) -> httpx.Response:
    """The operator's form post to the inbox (a bearer header needs no CSRF token)."""
    return client.post(f"/inbox/requests/{request_id}/decide", data={"action": action})


async def test_every_page_shows_text_never_a_python_object_or_template_syntax(
    served: tuple[httpx.Client, str], broker: HitlBroker, baton_env: dict[str, str]
) -> None:
    client, base = served
    pending = await broker.create(NewRequest("approval", "**Deploy** the *API*?", {"tag": "v2"}, 600))
    decided = await broker.create(NewRequest("input", "Which region?", None, 600, options=["eu", "us"]))
    broker.respond(decided["request_id"], Decision(response="eu", via="cli", decided_by="bob"))
    enroll = run_cli({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}, "people", "add", "alice", "--url", base)
    (enroll_link,) = [line.strip() for line in enroll.stdout.splitlines() if "/inbox/enroll?" in line]
    pages = [
        "/inbox/login",
        "/inbox",
        f"/inbox/requests/{pending['request_id']}",
        f"/inbox/requests/{decided['request_id']}",
        "/inbox/requests/hr_nothing_here",  # a "Not done" page
        "/inbox/link?r=hr_x&e=1&n=n&s=s",  # a "Not done" page
        _link(baton_env, pending["request_id"], pending["expires_epoch"]),
        enroll_link.removeprefix(base),
        "/inbox/enroll?p=alice&e=1&n=n&s=s",  # a "Not done" page
        "/inbox/console/requests",
        f"/inbox/console/requests/{pending['request_id']}",
        f"/inbox/console/requests/{decided['request_id']}",
        "/inbox/console/requests/hr_nothing_here",
        "/inbox/console/subagents",
        "/inbox/console/timers",
        "/inbox/console/adapters",
        "/inbox/console/receipts",
        "/inbox/console/charts",
    ]
    for path in pages:
        response = client.get(path)
        assert response.status_code < 500, (path, response.status_code)
        assert response.headers["content-type"].startswith("text/html"), path
        _clean(response)
    # the end pages of a decision: a signed link's, and the refusal of a second decision
    link = _link(baton_env, pending["request_id"], pending["expires_epoch"])
    page = client.get(link).text
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    _clean(client.post("/inbox/link", data={**fields, "action": "reject"}))
    _clean(_decide(client, pending["request_id"], "approve"))


async def test_a_refusal_after_someone_else_decided_names_who_and_what(
    served: tuple[httpx.Client, str], broker: HitlBroker
) -> None:
    client, _ = served
    asked = await broker.create(NewRequest("approval", "Drop the staging database?", None, 600))
    broker.respond(asked["request_id"], Decision(approved=False, via="cli", decided_by="bob"))
    response = _decide(client, asked["request_id"], "approve")
    assert response.status_code == 409
    assert re.search(r'<p id="next-step"><b>Already decided by bob: rejected\. ', _clean(response))


async def test_an_expired_link_says_nothing_was_approved_and_to_ask_for_a_new_one(
    served: tuple[httpx.Client, str], broker: HitlBroker, baton_env: dict[str, str]
) -> None:
    client, _ = served
    asked = await broker.create(NewRequest("approval", "Rotate the key?", None, 600))
    response = client.get(_link(baton_env, asked["request_id"], 1))  # expired in 1970
    assert response.status_code == 403
    text = _clean(response)
    assert "This link has expired." in text
    assert "nothing was approved. Ask for a new link." in text


async def test_a_quorum_approval_tells_the_approver_it_counted_and_takes_away_their_approve(
    served: tuple[httpx.Client, str], broker: HitlBroker
) -> None:
    client, _ = served
    asked = await broker.create(NewRequest("approval", "Wire SGD 9,000?", None, 600, required_approvals=2))
    rid = asked["request_id"]
    response = _decide(client, rid, "approve")
    assert response.status_code == 303
    page = _clean(client.get(response.headers["location"]))
    assert "Your approval counted (1 of 2): 1 more needed before anything runs." in page
    assert 'value="approve"' not in page and 'value="reject"' in page
    console = _clean(client.get(f"/inbox/console/requests/{rid}"))
    assert "Your approval counted (1 of 2)" in console and 'value="approve"' not in console
    again = _decide(client, rid, "approve")
    assert again.status_code == 409
    assert "Your approval already counted (a person counts once)" in _clean(again)


async def test_a_signed_link_decision_says_who_decided_and_that_nothing_more_is_needed(
    served: tuple[httpx.Client, str], broker: HitlBroker, baton_env: dict[str, str]
) -> None:
    client, _ = served
    asked = await broker.create(NewRequest("approval", "Rotate the key?", None, 600))
    page = client.get(_link(baton_env, asked["request_id"], asked["expires_epoch"])).text
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    text = _clean(client.post("/inbox/link", data={**fields, "action": "reject"}))
    assert f"Request {asked['request_id']} is rejected, decided by link-holder." in text
    assert "Nothing was approved; nothing more to do." in text


async def test_list_titles_are_plain_text_from_the_markdown_and_still_escaped(
    served: tuple[httpx.Client, str], broker: HitlBroker
) -> None:
    client, _ = served
    asked = await broker.create(
        NewRequest("approval", "**Deploy** the <b>API</b> [now](https://e.com)", None, 600)
    )
    title = "Deploy the &lt;b&gt;API&lt;/b&gt; now</a>"
    inbox = _clean(client.get("/inbox"))
    assert title in inbox and "**Deploy**" not in inbox
    console = _clean(client.get("/inbox/console/requests"))
    assert title in console and "**Deploy**" not in console
    # the row's title hides the link's address: approving needs the request's page
    row = console[console.index(f'data-request-id="{asked["request_id"]}"') :]
    assert 'class="review-link"' in row.split("</tr>")[0] and 'value="approve"' not in row.split("</tr>")[0]
