"""The web inbox served by uvicorn on 127.0.0.1, spoken to over real HTTP: auth, CSRF, origin checks, cookies
and signed links (the broker and store are in this process, so the tests can read what was decided)."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from baton.config import load_settings
from baton.hitl.broker import HitlBroker, NewRequest, get_broker
from baton.hitl.inbox import routes
from baton.identity.links import SECRET_FILE, LinkSigner
from baton.runtime import Runtime
from baton.testing.clock import ManualClock
from tests.servers import uvicorn_in_thread

TOKEN = "inbox-test-token-0123456789"


@pytest.fixture
def token_runtime(baton_env: dict[str, str]) -> Iterator[Runtime]:
    rt = Runtime.open(load_settings({**baton_env, "BATON_ADMIN_TOKEN": TOKEN}))
    yield rt
    rt.close()


Clients = Callable[[], httpx.Client]


@contextmanager
def _serving(runtime: Runtime) -> Iterator[tuple[str, Clients]]:
    """The inbox on a real loopback server; yields its base URL and a factory of fresh (cookie-less) clients."""
    clients: list[httpx.Client] = []
    with uvicorn_in_thread(Starlette(routes=routes(runtime))) as base_url:

        def client() -> httpx.Client:
            clients.append(httpx.Client(base_url=base_url, follow_redirects=False, timeout=30))
            return clients[-1]

        try:
            yield base_url, client
        finally:
            for opened in clients:
                opened.close()


@pytest.fixture
def token_inbox(token_runtime: Runtime) -> Iterator[tuple[str, Clients]]:
    with _serving(token_runtime) as served:
        yield served


@pytest.fixture
def inbox(runtime: Runtime) -> Iterator[tuple[str, Clients]]:
    with _serving(runtime) as served:
        yield served


def _create(broker: HitlBroker, new: NewRequest) -> str:
    async def make() -> str:
        return str((await broker.create(new))["request_id"])

    return anyio.run(make)


def _csrf(html: str) -> str:
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def _query(link: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}


def test_the_list_needs_a_login_and_shows_urgent_requests_first(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    _, _client = token_inbox
    broker = get_broker(token_runtime)
    calm = _create(broker, NewRequest("approval", "Calm one", timeout_seconds=60))
    urgent = _create(broker, NewRequest("input", "Urgent one", {"amount": 80}, 120, urgent=True))
    client = _client()
    assert client.get("/inbox").headers["location"] == "/inbox/login"
    assert client.get("/inbox?token=" + TOKEN).status_code == 303  # a token in the URL is never accepted
    assert client.post("/inbox/login", data={"token": "wrong"}).status_code == 401
    logged_in = client.post("/inbox/login", data={"token": TOKEN})
    assert logged_in.status_code == 303
    cookie = logged_in.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/inbox" in cookie
    page = client.get("/inbox")
    policy = page.headers["content-security-policy"]
    assert (
        page.status_code == 200 and "script-src 'self';" in policy
    )  # the one same-origin file, nothing inline
    assert (
        "unsafe-inline'; form" in policy and "unsafe-eval" not in policy and "connect-src 'self';" in policy
    )
    assert (
        '<script src="/inbox/static/passkey.js" defer></script>' in page.text and "<script>" not in page.text
    )
    assert page.text.index(urgent) < page.text.index(calm)
    bearer = _client()  # a fresh client: no cookie, the header alone
    assert bearer.get("/inbox", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_forms_need_their_csrf_token_and_the_same_origin(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    _, _client = token_inbox
    broker = get_broker(token_runtime)
    request_id = _create(
        broker, NewRequest("approval", "Approve <b>this</b>?", {"nested": {"a": [1, 2]}}, 60)
    )
    client = _client()
    client.post("/inbox/login", data={"token": TOKEN})
    page = client.get(f"/inbox/requests/{request_id}")
    assert "Approve &lt;b&gt;this&lt;/b&gt;?" in page.text and "<li>1</li>" in page.text
    decide = f"/inbox/requests/{request_id}/decide"
    missing = client.post(decide, data={"action": "approve"})
    assert missing.status_code == 403 and "hitl_csrf_invalid" in missing.text
    other = client.post(
        decide,
        data={"action": "approve", "csrf": LinkSigner.for_runtime(token_runtime).csrf("x", request_id)},
    )
    assert other.status_code == 403
    cross = client.post(
        decide,
        data={"action": "approve", "csrf": _csrf(page.text)},
        headers={"Origin": "https://evil.example"},
    )
    assert cross.status_code == 403 and broker.get(request_id)["status"] == "pending"
    site = client.post(
        decide, data={"action": "approve", "csrf": _csrf(page.text)}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert site.status_code == 403 and broker.get(request_id)["status"] == "pending"
    done = client.post(
        decide, data={"action": "reject", "csrf": _csrf(page.text), "admin_notes": "too risky"}
    )
    assert done.status_code == 303
    final = broker.get(request_id)
    assert (
        final["status"] == "rejected"
        and final["admin_notes"] == "too risky"
        and final["decided_via"] == "admin_token"
        and final["decided_by"] == "operator"
    )
    again = client.post(decide, data={"action": "approve", "csrf": _csrf(page.text)})
    assert again.status_code == 409 and "hitl_request_already_decided" in again.text


@pytest.mark.parametrize("action", ["reject", "decline"])
def test_a_reject_or_a_decline_in_the_inbox_never_approves(
    token_runtime: Runtime, token_inbox: tuple[str, Clients], action: str
) -> None:
    _, _client = token_inbox
    broker = get_broker(token_runtime)
    request_id = _create(broker, NewRequest("approval", "Ship the release?", None, 60))
    client = _client()
    client.post("/inbox/login", data={"token": TOKEN})
    page = client.get(f"/inbox/requests/{request_id}")
    done = client.post(
        f"/inbox/requests/{request_id}/decide", data={"action": action, "csrf": _csrf(page.text)}
    )
    assert done.status_code == 303
    final = broker.get(request_id)
    assert final["status"] == "rejected" and final["approved"] is False


def test_signed_links_are_bound_expiring_and_single_use(
    token_runtime: Runtime, token_inbox: tuple[str, Clients], manual_clock: ManualClock
) -> None:
    base_url, _client = token_inbox
    broker = get_broker(token_runtime)
    first = _create(broker, NewRequest("input", "Pick one", timeout_seconds=60, options=["eu", "us"]))
    second = _create(broker, NewRequest("approval", "Other", timeout_seconds=60))
    signer = LinkSigner.for_runtime(token_runtime)
    link = signer.link(base_url, first, manual_clock.time() + 60)
    client = _client()  # no session: the link alone grants access to its one request
    forged = {**_query(link), "s": _query(link)["s"][:-2] + "AA"}
    assert client.get("/inbox/link", params=forged).status_code == 403
    rebound = {**_query(link), "r": second}
    assert client.get("/inbox/link", params=rebound).status_code == 403
    expiring = _query(signer.link(base_url, first, manual_clock.time() + 30))
    assert client.get("/inbox/link", params=expiring).status_code == 200
    manual_clock.advance(30)  # the link's expiry on the server's clock, however long the test took
    refused = client.get("/inbox/link", params=expiring)
    assert refused.status_code == 403 and "expired" in refused.text
    page = client.get(link)
    assert page.status_code == 200 and "Pick one" in page.text
    form = {**_query(link), "csrf": _csrf(page.text), "action": "answer", "response": "us"}
    assert client.post("/inbox/link", data={**form, "csrf": "nope"}).status_code == 403
    assert broker.get(first)["status"] == "pending"
    recorded = client.post("/inbox/link", data=form)
    assert recorded.status_code == 200 and "answered" in recorded.text
    assert broker.get(first)["response"] == "us" and broker.get(first)["decided_via"] == "link"
    reused = client.get(link)
    assert reused.status_code == 403 and "already used" in reused.text
    assert client.post("/inbox/link", data=form).status_code == 403
    assert client.get(f"/inbox/requests/{second}").status_code == 303  # the link opened nothing else


def test_without_a_token_only_links_work_and_the_secret_file_is_private(
    baton_env: dict[str, str], runtime: Runtime, inbox: tuple[str, Clients], manual_clock: ManualClock
) -> None:
    base_url, _client = inbox
    broker = get_broker(runtime)
    request_id = _create(broker, NewRequest("approval", "Tokenless", timeout_seconds=60))
    client = _client()
    assert "BATON_ADMIN_TOKEN" in client.get("/inbox/login").text
    assert client.post("/inbox/login", data={"token": ""}).status_code == 401
    link = LinkSigner.for_runtime(runtime).link(base_url, request_id, manual_clock.time() + 60)
    page = client.get(link)
    assert (
        client.post(
            "/inbox/link", data={**_query(link), "csrf": _csrf(page.text), "action": "approve"}
        ).status_code
        == 200
    )
    assert broker.get(request_id)["approved"] is True
    secret = Path(baton_env["BATON_HOME"]) / SECRET_FILE
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_the_list_is_paged_and_names_each_requests_agent(
    token_runtime: Runtime, token_inbox: tuple[str, Clients]
) -> None:
    from baton.hitl.inbox import INBOX_PAGE

    _, _client = token_inbox
    broker = get_broker(token_runtime)
    made = {
        _create(
            broker,
            NewRequest("approval", f"Step {index}", timeout_seconds=600 + index, agent=f"bot-{index % 2}"),
        )
        for index in range(INBOX_PAGE + 3)
    }
    client = _client()
    assert client.post("/inbox/login", data={"token": TOKEN}).status_code == 303
    first = client.get("/inbox")
    assert first.status_code == 200 and f"Pending requests ({INBOX_PAGE + 3})" in first.text
    assert first.text.count('<td class="agent">bot-') == INBOX_PAGE
    following = first.text.split('id="next-page" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    second = client.get(following)
    assert second.status_code == 200 and 'id="next-page"' not in second.text
    shown = {rid for rid in made if rid in first.text} | {rid for rid in made if rid in second.text}
    assert shown == made and not {rid for rid in made if rid in first.text} & {
        rid for rid in made if rid in second.text
    }
    forged = client.get("/inbox?cursor=forged")  # an error page, never a crash
    assert forged.status_code == 400 and "invalid_arguments" in forged.text
