"""OAuth 2.1 resource server on --http, against a real issuer on loopback that signs tokens in the test."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from baton.testing.clock import ManualClock
from tests.conftest import baton_environ
from tests.oauth_issuer import Issuer, ec_key, rsa_key
from tests.raw_stdio import HANDSHAKE
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio


@dataclass
class Deployment:
    issuer: Issuer
    base: str

    @property
    def audience(self) -> str:
        return f"{self.base}/mcp"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One issuer and one ``baton serve --http`` trusting it, for the module."""
    tmp = tmp_path_factory.mktemp("oauth")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with Issuer() as issuer:
        env = baton_environ(
            tmp / "home",
            BATON_OAUTH_ISSUER=issuer.url,
            BATON_OAUTH_AUDIENCE=f"{base}/mcp",
            BATON_PUBLIC_URL=base,
            BATON_LOGIN_MAX_FAILURES="1000",  # the refusals below are many; the throttle is tested elsewhere
        )
        with http_server(env, f"127.0.0.1:{port}", tmp):
            yield Deployment(issuer, base)


@asynccontextmanager
async def mcp_client(deployment: Deployment, token: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(deployment.audience, http_client=http)
        async with Client(transport) as client:
            yield client


async def post_mcp(deployment: Deployment, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient() as http:
        return await http.post(deployment.audience, json={}, headers=headers)


async def test_no_token_gets_401_pointing_at_the_protected_resource_metadata(deployment: Deployment) -> None:
    refused = await post_mcp(deployment, None)
    assert refused.status_code == 401
    assert refused.json()["error_class"] == "http_unauthorized"
    metadata_url = f"{deployment.base}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in refused.headers["www-authenticate"]
    async with httpx.AsyncClient() as http:
        for url in (metadata_url, f"{deployment.base}/.well-known/oauth-protected-resource"):
            metadata = (await http.get(url)).json()
            assert metadata["resource"] == deployment.audience
            assert metadata["authorization_servers"] == [deployment.issuer.url]
            assert set(metadata["scopes_supported"]) == {"baton:agent", "baton:admin"}
        assert (await http.get(f"{deployment.base}/metrics")).status_code == 401


async def test_an_agent_token_calls_tools_and_reads_metrics(deployment: Deployment) -> None:
    token = deployment.issuer.token(deployment.audience)
    async with mcp_client(deployment, token) as client:
        result = await client.call_tool("mcp_ping", {})
        assert result.structured_content["success"] is True
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        assert (await http.get(f"{deployment.base}/metrics")).status_code == 200


def _unsigned(issuer: Issuer, audience: str) -> str:
    import time

    import jwt

    claims = {"iss": issuer.url, "aud": audience, "exp": int(time.time()) + 600, "scope": "baton:agent"}
    return jwt.encode(claims, None, algorithm="none", headers={"kid": issuer.keys[0].kid})


def _hmac(issuer: Issuer, audience: str) -> str:
    import time

    import jwt

    claims = {"iss": issuer.url, "aud": audience, "exp": int(time.time()) + 600, "scope": "baton:agent"}
    return jwt.encode(claims, "x" * 32, algorithm="HS256", headers={"kid": issuer.keys[0].kid})


#: Tokens that fail exactly one check each; everything else about them is what a good token carries.
FORGED: dict[str, Any] = {
    "expired": lambda issuer, audience: issuer.token(audience, expires_in=-120),
    # 45 s ago is past the 30 s leeway; time only makes it more so (no margin a slow machine could eat)
    "expired_beyond_the_leeway": lambda issuer, audience: issuer.token(audience, expires_in=-45),
    "no_exp": lambda issuer, audience: issuer.token(audience, without=("exp",)),
    "not_yet_valid": lambda issuer, audience: issuer.token(audience, not_before=int(time.time()) + 600),
    "wrong_audience": lambda issuer, audience: issuer.token("http://127.0.0.1:1/mcp"),
    "wrong_audience_in_a_list": lambda issuer, audience: issuer.token(["http://127.0.0.1:1/mcp", "other"]),
    "no_aud": lambda issuer, audience: issuer.token(audience, without=("aud",)),
    "wrong_issuer": lambda issuer, audience: issuer.token(audience, issuer="http://127.0.0.1:2"),
    "no_iss": lambda issuer, audience: issuer.token(audience, without=("iss",)),
    "unknown_key": lambda issuer, audience: issuer.token(audience, key=rsa_key()),  # never published
    # signed by another key under the published key's id: only the signature check can tell
    "wrong_key_known_kid": lambda issuer, audience: issuer.token(
        audience, key=rsa_key(), kid=issuer.keys[0].kid
    ),
    "alg_none": _unsigned,
    "hmac": _hmac,
    "garbage": lambda issuer, audience: "not.a.jwt",
}


@pytest.mark.parametrize("case", list(FORGED))
async def test_tokens_failing_a_check_are_refused(deployment: Deployment, case: str) -> None:
    response = await post_mcp(deployment, FORGED[case](deployment.issuer, deployment.audience))
    assert response.status_code == 401, case
    assert response.json()["error_class"] == "http_unauthorized"
    assert "resource_metadata=" in response.headers["www-authenticate"]


async def test_a_good_token_passes_each_check_that_refuses_its_forged_twins(deployment: Deployment) -> None:
    """The control for the table above: the same issuer, key and claims, none missing, get in (an audience
    list that contains this server's included)."""
    issuer, audience = deployment.issuer, deployment.audience
    for token in (
        issuer.token(audience),
        issuer.token([audience, "http://127.0.0.1:1/other"]),
        issuer.token(audience, not_before=int(time.time()) - 60),
    ):
        response = await post_mcp(deployment, token)
        assert response.status_code not in (401, 403), response.text


async def test_a_token_without_a_baton_scope_gets_403(deployment: Deployment) -> None:
    response = await post_mcp(
        deployment, deployment.issuer.token(deployment.audience, scope="openid profile")
    )
    assert response.status_code == 403
    assert response.json()["error_class"] == "http_insufficient_scope"
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_a_rotated_signing_key_is_fetched_when_a_token_names_it(deployment: Deployment) -> None:
    issuer = deployment.issuer
    old = issuer.keys[0]
    assert (await post_mcp(deployment, issuer.token(deployment.audience))).status_code != 401
    fetches = issuer.jwks_fetches
    new = ec_key()
    issuer.rotate(new)
    try:
        token = issuer.token(deployment.audience, key=new)
        async with mcp_client(deployment, token) as client:
            assert (await client.call_tool("mcp_ping", {})).structured_content["success"] is True
        assert issuer.jwks_fetches == fetches + 1  # one refetch for the unknown kid, then cached
    finally:
        issuer.rotate(old)


async def test_the_admin_scope_decides_an_approval_and_the_agent_scope_may_not(
    deployment: Deployment,
) -> None:
    issuer, audience = deployment.issuer, deployment.audience
    agent, admin = issuer.token(audience), issuer.token(audience, scope="baton:admin")
    outcome: dict[str, Any] = {}

    async def ask() -> None:
        async with mcp_client(deployment, agent) as client:
            result = await client.call_tool(
                "mcp_request_admin_approval", {"request_message": "Deploy?", "timeout_seconds": 3600}
            )
            outcome.update(result.structured_content)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            async with (
                mcp_client(deployment, agent) as agent_client,
                mcp_client(deployment, admin) as admin_client,
            ):
                pending: list[dict[str, Any]] = []
                while not pending:
                    listed = await admin_client.call_tool("mcp_list_pending_requests", {})
                    pending = [r for r in listed.structured_content["requests"] if r["message"] == "Deploy?"]
                    await anyio.sleep(0.05)
                request_id = pending[0]["request_id"]
                denied = await agent_client.call_tool(
                    "mcp_respond_to_request", {"request_id": request_id, "approved": True}
                )
                assert denied.structured_content["error_class"] == "hitl_decider_not_authorized"
                decided = await admin_client.call_tool(
                    "mcp_respond_to_request",
                    {"request_id": request_id, "approved": True, "admin_notes": "ok"},
                )
                assert decided.structured_content["success"] is True, decided.structured_content
    assert outcome["approved"] is True and outcome["decision"] == "approved"
    async with mcp_client(deployment, agent) as client:
        status = await client.call_tool("mcp_get_request_status", {"request_id": request_id})
    assert status.structured_content["decided_via"] == "mcp_admin"


async def test_the_inbox_opens_for_an_admin_token_only(deployment: Deployment) -> None:
    issuer, audience = deployment.issuer, deployment.audience
    async with httpx.AsyncClient(follow_redirects=False) as http:
        admin = await http.get(
            f"{deployment.base}/inbox",
            headers={"Authorization": f"Bearer {issuer.token(audience, scope='baton:admin')}"},
        )
        agent = await http.get(
            f"{deployment.base}/inbox", headers={"Authorization": f"Bearer {issuer.token(audience)}"}
        )
    assert admin.status_code == 200
    assert agent.status_code in (302, 303, 307)  # to the login form: an agent token is not a person


def _serve_refused(env: dict[str, str]) -> str:
    """``baton serve --http`` with ``env``: it must refuse to start; its stderr."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "baton", "serve", "--http", f"127.0.0.1:{free_port()}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def test_oauth_without_an_audience_refuses_to_start(baton_env: dict[str, str], tmp_path: Path) -> None:
    stderr = _serve_refused({**baton_env, "BATON_OAUTH_ISSUER": "https://issuer.example"})
    assert "config_invalid" in stderr and "BATON_OAUTH_AUDIENCE" in stderr


@pytest.mark.parametrize(
    ("issuer", "audience", "named", "why"),
    [
        (
            "issuer.example",
            "https://baton.example/mcp",
            "BATON_OAUTH_ISSUER",
            "must be an absolute https URL",
        ),
        ("https://issuer.example", "ftp://baton.example/mcp", "BATON_OAUTH_AUDIENCE", "absolute https URL"),
        (
            "http://issuer.example",
            "https://baton.example/mcp",
            "BATON_OAUTH_ISSUER",
            "plain http only on loopback",
        ),
        ("https://issuer.example", "http://baton.example/mcp", "BATON_OAUTH_AUDIENCE", "plain http only"),
    ],
)
def test_an_unusable_issuer_or_audience_is_refused_naming_the_setting(
    baton_env: dict[str, str], issuer: str, audience: str, named: str, why: str
) -> None:
    """The refusal says which of the two settings is wrong and why, in one line, without a traceback."""
    stderr = _serve_refused({**baton_env, "BATON_OAUTH_ISSUER": issuer, "BATON_OAUTH_AUDIENCE": audience})
    assert "config_invalid" in stderr
    line = next(line for line in stderr.splitlines() if "config_invalid" in line or named in line)
    assert named in stderr and why in stderr, stderr
    other = ({"BATON_OAUTH_ISSUER", "BATON_OAUTH_AUDIENCE"} - {named}).pop()
    assert f"{other} must" not in line


async def test_a_flood_of_made_up_key_ids_does_not_flood_the_issuer(manual_clock: ManualClock) -> None:
    from baton.http.oauth import REFETCH_BURST, JwtVerifier

    audience = "http://127.0.0.1:9/mcp"
    # the manual clock stands still: the bucket cannot refill however slow the machine
    with Issuer() as issuer:
        verifier = JwtVerifier(issuer.url, audience)
        assert await verifier.verify_token(issuer.token(audience)) is not None
        for _ in range(20):
            assert await verifier.verify_token(issuer.token(audience, key=rsa_key())) is None
        access = await verifier.verify_token(issuer.token(audience, scope="baton:admin baton:agent"))
    assert issuer.jwks_fetches == 1 + REFETCH_BURST
    assert access is not None and access.scopes == ["baton:admin", "baton:agent"]
    assert access.resource == audience and access.subject == "user-1"


async def test_the_refetch_bucket_refills_one_fetch_per_interval_of_the_clock(
    manual_clock: ManualClock,
) -> None:
    from baton.http.oauth import REFETCH_BURST, REFETCH_SECONDS, JwtVerifier

    audience = "http://127.0.0.1:9/mcp"
    with Issuer() as issuer:
        verifier = JwtVerifier(issuer.url, audience)
        made_up = [issuer.token(audience, key=rsa_key()) for _ in range(3)]
        assert await verifier.verify_token(issuer.token(audience)) is not None
        for _ in range(int(REFETCH_BURST) + 1):
            assert await verifier.verify_token(made_up[0]) is None
        spent = issuer.jwks_fetches
        manual_clock.advance(REFETCH_SECONDS * 0.9)
        assert await verifier.verify_token(made_up[1]) is None
        assert issuer.jwks_fetches == spent  # not yet a whole token back
        manual_clock.advance(REFETCH_SECONDS * 0.1)
        assert await verifier.verify_token(made_up[1]) is None
        assert await verifier.verify_token(made_up[2]) is None
    assert spent == 1 + REFETCH_BURST
    assert issuer.jwks_fetches == spent + 1  # one interval, one refetch


async def test_a_session_stays_with_the_principal_that_opened_it(deployment: Deployment) -> None:
    issuer, audience = deployment.issuer, deployment.audience
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}

    def bearer(subject: str) -> dict[str, str]:
        return {**headers, "Authorization": f"Bearer {issuer.token(audience, sub=subject)}"}

    async with httpx.AsyncClient() as http:
        opened = await http.post(audience, json=HANDSHAKE[0], headers=bearer("alice"))
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        stolen = await http.post(audience, json=listing, headers={**bearer("mallory"), **session})
        own = await http.post(audience, json=listing, headers={**bearer("alice"), **session})  # a fresh token
    assert stolen.status_code == 404
    assert own.status_code == 200, own.text


async def test_cached_keys_outlive_an_issuer_outage_but_unknown_keys_do_not() -> None:
    from baton.http.oauth import JwtVerifier

    audience = "http://127.0.0.1:9/mcp"
    with Issuer() as issuer:
        verifier = JwtVerifier(issuer.url, audience, jwks_ttl_seconds=0)  # every check refreshes
        assert await verifier.verify_token(issuer.token(audience)) is not None
        known, unknown = issuer.token(audience), issuer.token(audience, key=ec_key())
    # the issuer is gone now
    assert await verifier.verify_token(known) is not None
    assert await verifier.verify_token(unknown) is None


async def test_static_tokens_keep_working_next_to_oauth(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    static = "static-agent-token-0123456789"
    with Issuer() as issuer:
        env = {
            **baton_env,
            "BATON_OAUTH_ISSUER": issuer.url,
            "BATON_OAUTH_AUDIENCE": f"{base}/mcp",
            "BATON_HTTP_TOKEN": static,
        }
        with http_server(env, f"127.0.0.1:{port}", tmp_path):
            async with httpx.AsyncClient() as http:

                async def metrics(token: str) -> int:
                    response = await http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"})
                    return response.status_code

                assert await metrics(static) == 200
                assert await metrics(issuer.token(f"{base}/mcp")) == 200
                assert await metrics(static + "x") == 401


async def test_each_oauth_client_is_its_own_agent(deployment: Deployment) -> None:
    """The agent of an access token is ``oauth:`` + its client id; another client does not see its timers."""
    timer = {"name": "oauth-timer", "delay_seconds": 3600, "action": {"kind": "record"}}
    first = deployment.issuer.token(deployment.audience, client_id="client-a")
    second = deployment.issuer.token(deployment.audience, client_id="client-b")
    async with mcp_client(deployment, first) as a, mcp_client(deployment, second) as b:
        mine = (await a.call_tool("mcp_set_timer", timer)).structured_content
        assert mine is not None and mine["agent"] == "oauth:client-a/user-1"
        listed = (await b.call_tool("mcp_list_timers", {})).structured_content
        assert listed is not None and mine["timer_id"] not in {t["timer_id"] for t in listed["timers"]}
        cancelled = (await a.call_tool("mcp_cancel_timer", {"timer_id": mine["timer_id"]})).structured_content
        assert cancelled is not None and cancelled["status"] == "cancelled"


@pytest.mark.parametrize(
    ("claims", "agent"),
    [
        ({"client_id": None, "azp": "azp-client"}, "oauth:azp-client/user-1"),
        ({"client_id": None, "sub": "subject-7"}, "oauth:subject-7"),
    ],
)
async def test_a_token_without_a_client_id_is_the_agent_its_azp_or_subject_names(
    deployment: Deployment, claims: dict[str, Any], agent: str
) -> None:
    """Without ``client_id`` the agent is ``azp``, else the subject: never one shared ``unknown`` agent."""
    without = tuple(name for name, value in claims.items() if value is None)
    given = {name: value for name, value in claims.items() if value is not None}
    token = deployment.issuer.token(deployment.audience, without=without, **given)
    timer = {"name": "oauth-fallback", "delay_seconds": 3600, "action": {"kind": "record"}}
    async with mcp_client(deployment, token) as client:
        mine = (await client.call_tool("mcp_set_timer", timer)).structured_content
        assert mine is not None and mine["agent"] == agent, mine
        await client.call_tool("mcp_cancel_timer", {"timer_id": mine["timer_id"]})


async def test_two_users_of_one_client_app_are_two_agents(deployment: Deployment) -> None:
    """The agent is the client and the subject: one user of an app never sees another user's timers."""
    timer = {"name": "per-user", "delay_seconds": 3600, "action": {"kind": "record"}}
    first = deployment.issuer.token(deployment.audience, client_id="shared-app", sub="alice")
    second = deployment.issuer.token(deployment.audience, client_id="shared-app", sub="bob")
    async with mcp_client(deployment, first) as a, mcp_client(deployment, second) as b:
        mine = (await a.call_tool("mcp_set_timer", timer)).structured_content
        listed = (await b.call_tool("mcp_list_timers", {})).structured_content
        theirs = (await b.call_tool("mcp_cancel_timer", {"timer_id": mine["timer_id"]})).structured_content
        await a.call_tool("mcp_cancel_timer", {"timer_id": mine["timer_id"]})
    assert mine["agent"] == "oauth:shared-app/alice"
    assert listed is not None and mine["timer_id"] not in {t["timer_id"] for t in listed["timers"]}
    assert theirs is not None and theirs["error_class"] == "timer_not_found"
