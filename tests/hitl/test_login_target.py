"""A login returns to the page it was asked for, on this origin only: real HTTP to a real
``baton serve --http``."""

from __future__ import annotations

from typing import Any

import httpx

ADMIN_TOKEN = "target-admin-token-fedcba9876543210"

OFF_SITE = [
    "https://evil.example/inbox",
    "//evil.example/inbox",
    "/\\evil.example/inbox",
    "\\\\evil.example",
    "javascript:alert(1)",
    "/inbox\r\nSet-Cookie: x=1",
    "/elsewhere",
    "",
]


def _client(base_url: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, follow_redirects=False, timeout=30)


def _login(client: httpx.Client, target: str) -> httpx.Response:
    return client.post(
        "/inbox/login",
        data={"token": ADMIN_TOKEN, "next": target},
        headers={"Origin": str(client.base_url).rstrip("/")},
    )


def test_a_page_asked_for_without_a_login_is_where_the_login_goes_back_to(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    server = http_server_factory({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN})
    with _client(server.base_url) as client:
        asked = client.get("/inbox/requests/hr-abc?x=1")
        assert asked.status_code == 303
        assert asked.headers["location"] == "/inbox/login?next=/inbox/requests/hr-abc%3Fx%3D1"
        form = client.get(asked.headers["location"])
        assert 'name="next" value="/inbox/requests/hr-abc?x=1"' in form.text
        logged_in = _login(client, "/inbox/requests/hr-abc?x=1")
        assert logged_in.status_code == 303
        assert logged_in.headers["location"] == "/inbox/requests/hr-abc?x=1"
        assert client.get("/inbox").status_code == 200
    with _client(server.base_url) as client:
        assert client.get("/inbox").headers["location"] == "/inbox/login"


def test_a_login_never_sends_the_browser_off_the_inbox(
    baton_env: dict[str, str], http_server_factory: Any
) -> None:
    server = http_server_factory({**baton_env, "BATON_ADMIN_TOKEN": ADMIN_TOKEN})
    for target in OFF_SITE:
        with _client(server.base_url) as client:
            assert 'name="next"' not in client.get("/inbox/login", params={"next": target}).text, target
            logged_in = _login(client, target)
            assert logged_in.status_code == 303, target
            assert logged_in.headers["location"] == "/inbox", target
