"""A webhook URL chosen by the agent reaches only public addresses unless the operator allows more
(BATON_WEBHOOK_ALLOW), judged on the address connected to; every refusal is the same answer. Through a
real ``baton serve`` over stdio and a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import base64
import ipaddress
import json

import anyio
import pytest

from baton.errors import ConfigError
from baton.notify.destinations import DestinationPolicy, DestinationRefusedError, is_public
from baton.testing.webhooks import WebhookReceiver
from tests.conftest import call, stdio_session

pytestmark = pytest.mark.anyio


def notification_receipts(env: dict[str, str]) -> list[dict[str, object]]:
    from baton.config import load_settings
    from baton.runtime import Runtime

    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload for r in runtime.receipts.list(kind="notification")]
    finally:
        runtime.close()


async def test_internal_destinations_are_refused_alike_and_nothing_is_sent(baton_env: dict[str, str]) -> None:
    with WebhookReceiver() as web:
        port = web.base_url.rsplit(":", 1)[1]
        env = {**baton_env, "HITL_WEBHOOK_URL": web.url("/operator"), "BATON_NOTIFY_ATTEMPTS": "1"}
        urls = [
            web.url("/listening"),  # a service that answers
            "http://127.0.0.1:9/closed",  # nothing listens: the answer must be the same
            f"http://localhost:{port}/by-name",  # a name that resolves to loopback (DNS rebinding)
            f"http://LOCALHOST.:{port}/by-name",
            f"http://[::ffff:127.0.0.1]:{port}/mapped",
            f"http://[::1]:{port}/v6",
            f"http://2130706433:{port}/decimal",  # 127.0.0.1 written as one number
            "http://10.0.0.1/private",
            "http://172.16.0.1/private",
            "http://192.168.1.1/private",
            "http://100.64.0.1/cgnat",
            "http://169.254.169.254/latest/meta-data",  # cloud metadata
            "http://[fe80::1]/link-local",
            "http://[fd00::1]/ula",
            f"http://0.0.0.0:{port}/this-network",
            "http://224.0.0.1/multicast",
            "http://240.0.0.1/reserved",
            "http://[64:ff9b::7f00:1]/nat64",
            "http://[2002:7f00:1::]/6to4",
            "http://no-such-host.invalid/unresolvable",
        ]
        async with stdio_session(env) as session:
            answers = [
                await call(session, "mcp_send_webhook", {"payload": {"probe": n}, "url": url})
                for n, url in enumerate(urls)
            ]
            operator = await call(session, "mcp_send_webhook", {"payload": {"probe": "operator"}})
            same_url = await call(
                session, "mcp_send_webhook", {"payload": {"probe": "named"}, "url": web.url("/operator")}
            )
        received = [request.path for request in web.requests]
    refused = [*answers, same_url]
    assert {json.dumps(answer, sort_keys=True) for answer in refused} == {
        json.dumps(
            {
                "success": False,
                "channel": "webhook",
                "error_class": "notification_destination_refused",
                "error": refused[0]["error"],
            },
            sort_keys=True,
        )
    }, refused
    assert "BATON_WEBHOOK_ALLOW" in str(refused[0]["error"])
    # the operator's own HITL_WEBHOOK_URL is trusted as configured; the same URL named by the agent is not
    assert operator["success"] is True, operator
    assert received == ["/operator"]
    outcomes = [(r["outcome"], r["error_class"]) for r in notification_receipts(env)]
    assert outcomes.count(("refused", "notification_destination_refused")) == len(refused)
    assert outcomes.count(("delivered", None)) == 1


async def test_the_operator_allow_list_opens_exactly_what_it_names(baton_env: dict[str, str]) -> None:
    with WebhookReceiver() as web:
        port = web.base_url.rsplit(":", 1)[1]
        by_cidr = {**baton_env, "BATON_WEBHOOK_ALLOW": "192.0.2.0/24, 127.0.0.0/8"}
        async with stdio_session(by_cidr) as session:
            literal = await call(
                session, "mcp_send_webhook", {"payload": {"n": 1}, "url": web.url("/ip?q=1")}
            )
            named = await call(
                session,
                "mcp_send_webhook",
                {"payload": {"n": 2, "type": "kept"}, "url": f"http://hook-user:pw@localhost:{port}/named"},
            )
            private = await call(
                session, "mcp_send_webhook", {"payload": {"n": 3}, "url": "http://10.0.0.1/"}
            )
        by_name = {**baton_env, "BATON_WEBHOOK_ALLOW": "localhost", "BATON_NOTIFY_ATTEMPTS": "1"}
        async with stdio_session(by_name) as session:
            host_allowed = await call(
                session, "mcp_send_webhook", {"payload": {"n": 4}, "url": f"http://localhost:{port}/host"}
            )
            ip_not_allowed = await call(
                session, "mcp_send_webhook", {"payload": {"n": 5}, "url": web.url("/ip-not-named")}
            )
        requests = {request.path: request for request in web.requests}
    assert literal["success"] is True and named["success"] is True and host_allowed["success"] is True
    assert private["error_class"] == ip_not_allowed["error_class"] == "notification_destination_refused"
    assert sorted(requests) == ["/host", "/ip", "/named"]
    assert requests["/ip"].query == {"q": ["1"]} and requests["/ip"].json == {"n": 1}
    # connected to the resolved address, but the request still names the host (Host header), exactly as given
    assert requests["/named"].headers["host"] == f"localhost:{port}"
    assert requests["/named"].json == {"n": 2, "type": "kept"}
    expected = base64.b64encode(b"hook-user:pw").decode()
    assert requests["/named"].headers["authorization"] == f"Basic {expected}"
    assert requests["/host"].headers["host"] == f"localhost:{port}"


async def test_an_allowed_host_name_never_opens_a_name_that_merely_ends_with_it(
    baton_env: dict[str, str],
) -> None:
    # the operator allows the intranet host "host"; "localhost" ends with it (as evil-example.com ends with
    # example.com) and resolves to loopback: it is not the allowed name, so it stays refused
    with WebhookReceiver() as web:
        port = web.base_url.rsplit(":", 1)[1]
        env = {**baton_env, "BATON_WEBHOOK_ALLOW": "host", "BATON_NOTIFY_ATTEMPTS": "1"}
        async with stdio_session(env) as session:
            answers = [
                await call(session, "mcp_send_webhook", {"payload": {"n": n}, "url": url})
                for n, url in enumerate([f"http://localhost:{port}/suffix", f"http://LocalHost.:{port}/case"])
            ]
        received = [request.path for request in web.requests]
    assert [a.get("error_class") for a in answers] == ["notification_destination_refused"] * 2, answers
    assert received == []


async def test_a_malformed_allow_list_is_config_invalid_and_sends_nothing(baton_env: dict[str, str]) -> None:
    with WebhookReceiver() as web:
        env = {**baton_env, "BATON_WEBHOOK_ALLOW": "127.0.0.0/8, http://x/"}
        async with stdio_session(env) as session:
            answer = await call(session, "mcp_send_webhook", {"payload": {"n": 1}, "url": web.url("/x")})
        assert web.requests == []
    assert answer["error_class"] == "config_invalid"
    assert "BATON_WEBHOOK_ALLOW" in answer["error"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
        ("8.8.8.8", True),
        ("127.0.0.1", False),
        ("127.255.0.9", False),
        ("0.1.2.3", False),
        ("10.9.8.7", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("100.127.255.254", False),
        ("169.254.1.1", False),
        ("198.18.0.1", False),
        ("192.0.0.8", False),
        ("224.0.0.251", False),
        ("239.255.255.250", False),
        ("255.255.255.255", False),
        ("::", False),
        ("::1", False),
        ("::ffff:10.0.0.1", False),
        ("::ffff:8.8.8.8", True),
        ("::127.0.0.1", False),
        ("fe80::1", False),
        ("fec0::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("2001:db8::1", False),
        ("64:ff9b::a00:1", False),
        ("64:ff9b:1::a00:1", False),
        ("2002:a00:1::1", False),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo, client 10.0.0.1
    ],
)
def test_which_addresses_count_as_public(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


def test_the_allow_list_accepts_cidrs_addresses_and_host_names_only() -> None:
    policy = DestinationPolicy.parse(" 10.0.0.0/8 , 192.168.1.5, [fd00::1], Hooks.Internal.Example. ,")
    assert policy.permits(ipaddress.ip_address("10.1.2.3"))
    assert policy.permits(ipaddress.ip_address("::ffff:10.1.2.3"))  # the same IPv4 address, mapped
    assert policy.permits(ipaddress.ip_address("192.168.1.5"))
    assert not policy.permits(ipaddress.ip_address("192.168.1.6"))
    assert policy.permits(ipaddress.ip_address("fd00::1"))
    assert policy.allows_host("hooks.internal.example")
    assert not policy.allows_host("internal.example")
    for bad in ("http://x/", "10.0.0.0/33", "user@host", "a b"):
        with pytest.raises(ConfigError):
            DestinationPolicy.parse(bad)


async def test_a_name_is_resolved_once_and_only_its_permitted_addresses_are_kept() -> None:
    policy = DestinationPolicy.parse(None)
    with pytest.raises(DestinationRefusedError), anyio.fail_after(300):
        await policy.resolve("localhost", 80, 30)
    allowed = DestinationPolicy.parse("127.0.0.0/8")
    with anyio.fail_after(300):
        addresses = await allowed.resolve("localhost", 80, 30)
    assert addresses and all(
        ipaddress.ip_address(a) in ipaddress.ip_network("127.0.0.0/8") for a in addresses
    )
