"""Tokens and inbox login over real ``baton serve --http`` processes: weak tokens refused off loopback,
failed logins throttled per address (429), logout revokes the session in the store (every replica),
X-Forwarded-Proto believed only from a trusted proxy, and a link's key needs more than the token."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from baton.config import load_settings
from baton.identity.links import LinkSigner, load_secret
from baton.identity.sessions import LoginThrottle
from baton.testing.clock import ManualClock
from tests.servers import free_port, http_server

TOKEN = "login-test-token-0123456789abcdefXYZ"


def _serve(env: dict[str, str], bind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton", "serve", "--http", bind],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("variable", ["BATON_HTTP_TOKEN", "BATON_ADMIN_TOKEN"])
@pytest.mark.parametrize(
    "weak",
    [
        "7",
        "a" * 40,
        "abababababababababababababababab",
        "changeme-changeme-changeme-change",
        "Password123!Password123!Password",
        "abcdefghijklmnopqrstuvwxyz012345",
        "baton-admin-token-baton-admin-tok",  # baton's own words: zxcvbn alone scored it 4, 10^30
        "changeme-" * 2000,  # long (18,000 characters): only the first 72 are estimated, quickly
    ],
)
def test_weak_tokens_are_refused_off_loopback(baton_env: dict[str, str], variable: str, weak: str) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": secrets.token_urlsafe(32), variable: weak}
    done = _serve(env, f"0.0.0.0:{free_port()}")
    assert done.returncode == 1
    assert "http_bind_refused" in done.stderr and variable in done.stderr
    if len(weak) > 1:
        assert weak not in done.stderr  # the refusal never echoes the token
    assert done.stdout == ""


def test_a_generated_token_is_accepted_off_loopback(baton_env: dict[str, str], tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    port = free_port()
    env = {**baton_env, "BATON_HTTP_TOKEN": token, "BATON_ADMIN_TOKEN": secrets.token_urlsafe(32)}
    with http_server(env, f"0.0.0.0:{port}", tmp_path):
        refused = httpx.get(f"http://127.0.0.1:{port}/metrics")
        served = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert (refused.status_code, served.status_code) == (401, 200)


#: Remote peers, as a trusted proxy on 127.0.0.1 names them (a loopback peer is never locked out).
REMOTE, OTHER = "203.0.113.7", "203.0.113.8"


def _login(base: str, token: str, *, client: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": client} if client else {}
    with httpx.Client(follow_redirects=False) as http:
        return http.post(f"{base}/inbox/login", data={"token": token}, headers=headers)


def test_failed_logins_are_throttled_per_address(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env = {
        **baton_env,
        "BATON_ADMIN_TOKEN": TOKEN,
        "BATON_TRUSTED_PROXIES": "127.0.0.1",
        "BATON_LOGIN_MAX_FAILURES": "2",
        "BATON_LOGIN_LOCKOUT_FIRST_SECONDS": "3600",  # the lockout outlasts the test, however slow
    }
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        base = f"http://127.0.0.1:{port}"
        statuses = []
        for _ in range(12):
            response = _login(base, "wrong-guess", client=REMOTE)
            statuses.append(response.status_code)
            if response.status_code == 429:
                break
        assert statuses[:2] == [401, 401] and statuses[-1] == 429, statuses
        assert int(response.headers["retry-after"]) >= 1
        assert "http_rate_limited" in response.text
        assert _login(base, TOKEN, client=REMOTE).status_code == 429  # locked: not even the right token
        assert _login(base, TOKEN, client=OTHER).status_code == 303  # another address is not
        assert _login(base, TOKEN).status_code == 303  # nor the operator on loopback


ADMIN = "admin-token-for-throttle-tests-0123456789"


def _bearer(base: str, path: str, token: str, *, client: str = REMOTE) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": client}
    with httpx.Client(follow_redirects=False) as http:
        return http.get(f"{base}{path}", headers=headers)


def test_bearer_guesses_lock_out_one_address_on_one_route_family(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **baton_env,
        "BATON_HTTP_TOKEN": TOKEN,
        "BATON_ADMIN_TOKEN": ADMIN,
        "BATON_TRUSTED_PROXIES": "127.0.0.1",
        "BATON_LOGIN_MAX_FAILURES": "3",
        "BATON_LOGIN_LOCKOUT_FIRST_SECONDS": "3600",
    }
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        base = f"http://127.0.0.1:{port}"
        for _ in range(5):  # no credential at all is no guess: not counted
            assert httpx.get(f"{base}/metrics", headers={"X-Forwarded-For": REMOTE}).status_code == 401
        assert _bearer(base, "/metrics", "guess-1").status_code == 401
        assert _bearer(base, "/metrics", "guess-2").status_code == 401
        assert _bearer(base, "/metrics", TOKEN).status_code == 200  # an accepted token clears the count
        for n in range(3, 7):  # three free again, the fourth locks /metrics for this address
            assert _bearer(base, "/metrics", f"guess-{n}").status_code == 401
        locked = _bearer(base, "/metrics", TOKEN)
        assert locked.status_code == 429  # the right token is not even checked
        assert int(locked.headers["retry-after"]) > 60
        assert locked.json()["error_class"] == "http_rate_limited"
        assert _bearer(base, "/inbox", "guess-7").status_code == 303  # the inbox counts apart: not locked
        assert _bearer(base, "/inbox", ADMIN).status_code == 200
        assert _bearer(base, "/metrics", TOKEN, client=OTHER).status_code == 200  # another address
        for n in range(20):  # the operator on loopback is never locked out
            assert _bearer(base, "/metrics", f"local-guess-{n}", client="").status_code == 401
        assert _bearer(base, "/metrics", TOKEN, client="").status_code == 200


def test_the_operator_on_loopback_is_never_locked_out(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env = {
        **baton_env,
        "BATON_ADMIN_TOKEN": TOKEN,
        "BATON_LOGIN_MAX_FAILURES": "1",
        "BATON_LOGIN_LOCKOUT_FIRST_SECONDS": "3600",
    }
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        base = f"http://127.0.0.1:{port}"
        assert [_login(base, "typo").status_code for _ in range(5)] == [401] * 5
        assert _login(base, TOKEN).status_code == 303


def test_the_lockout_doubles_and_a_success_clears_it() -> None:
    throttle = LoginThrottle(free_failures=2, max_lockout_seconds=60)
    for _ in range(2):
        throttle.failed("a", now=0)
    assert throttle.retry_after("a", now=0) == 0
    waits = []
    for _ in range(8):
        throttle.failed("a", now=100)
        waits.append(throttle.retry_after("a", now=100))
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60]
    assert throttle.retry_after("b", now=100) == 0
    throttle.succeeded("a")
    assert throttle.retry_after("a", now=100) == 0


def test_a_lockout_ends_when_the_clock_passes_it(manual_clock: ManualClock) -> None:
    throttle = LoginThrottle(free_failures=0, max_lockout_seconds=60, first_lockout_seconds=30)
    throttle.failed("a")
    assert throttle.retry_after("a") == 30  # however slow the machine: time stands still
    manual_clock.advance(29)
    assert throttle.retry_after("a") == 1
    manual_clock.advance(1)
    assert throttle.retry_after("a") == 0


def _csrf(html: str) -> str:
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def test_logout_revokes_the_session_on_every_replica(baton_env: dict[str, str], tmp_path: Path) -> None:
    env = {**baton_env, "BATON_ADMIN_TOKEN": TOKEN}
    one, two = free_port(), free_port()
    with http_server(env, f"127.0.0.1:{one}", tmp_path), http_server(env, f"127.0.0.1:{two}", tmp_path):
        login = _login(f"http://127.0.0.1:{one}", TOKEN)
        assert login.status_code == 303
        cookie = login.cookies["baton_inbox"]
        stolen = {"Cookie": f"baton_inbox={cookie}"}
        assert httpx.get(f"http://127.0.0.1:{two}/inbox", headers=stolen).status_code == 200
        page = httpx.get(f"http://127.0.0.1:{one}/inbox", headers=stolen)
        assert page.status_code == 200
        out = httpx.post(
            f"http://127.0.0.1:{one}/inbox/logout", headers=stolen, data={"csrf": _csrf(page.text)}
        )
        assert out.status_code == 303
        for port in (one, two):
            again = httpx.get(f"http://127.0.0.1:{port}/inbox", headers=stolen)
            assert again.status_code == 303 and again.headers["location"] == "/inbox/login"


@pytest.mark.parametrize(
    ("trusted", "source", "secure"),
    [("127.0.0.1", "127.0.0.1", True), (None, "127.0.0.1", False), ("127.0.0.1", "127.0.0.2", False)],
)
def test_the_forwarded_protocol_counts_only_from_a_trusted_proxy(
    baton_env: dict[str, str], tmp_path: Path, trusted: str | None, source: str, secure: bool
) -> None:
    port = free_port()
    env = {**baton_env, "BATON_ADMIN_TOKEN": TOKEN, "BATON_PUBLIC_URL": "https://baton.example.com"}
    if trusted:
        env["BATON_TRUSTED_PROXIES"] = trusted
    with http_server(env, f"127.0.0.2:{port}" if source == "127.0.0.2" else f"127.0.0.1:{port}", tmp_path):
        host = "127.0.0.2" if source == "127.0.0.2" else "127.0.0.1"
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, follow_redirects=False) as client:
            response = client.post(
                f"http://{host}:{port}/inbox/login",
                data={"token": TOKEN},
                headers={"X-Forwarded-Proto": "https", "Host": "baton.example.com"},
            )
        assert response.status_code == 303
        assert ("secure" in response.headers["set-cookie"].lower()) is secure


def test_a_leaked_link_does_not_reveal_the_token(baton_env: dict[str, str], tmp_path: Path) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": TOKEN}
    settings = load_settings(env)
    signer = LinkSigner(load_secret(settings))
    query = signer.link_params("hr_1", 2_000_000_000, "nonce")
    # the old derivation (HMAC of the token alone) no longer reproduces the signature: a guess of the
    # token cannot be checked offline against a leaked link without the home's random secret
    old_secret = hmac.new(TOKEN.encode(), b"baton-hitl-link-secret-v1", hashlib.sha256).digest()
    assert LinkSigner(old_secret).link_params("hr_1", 2_000_000_000, "nonce")["s"] != query["s"]
    other_home = load_settings({**env, "BATON_HOME": str(tmp_path / "other-home")})
    assert LinkSigner(load_secret(other_home)).link_params("hr_1", 2_000_000_000, "nonce")["s"] != query["s"]
    rotated = load_settings({**env, "BATON_HTTP_TOKEN": TOKEN + "-rotated"})
    assert LinkSigner(load_secret(rotated)).link_params("hr_1", 2_000_000_000, "nonce")["s"] != query["s"]
    assert LinkSigner(load_secret(load_settings(env))).link_params("hr_1", 2_000_000_000, "nonce") == query
