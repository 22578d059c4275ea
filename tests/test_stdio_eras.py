"""One stdio connection in the era its client opens with (baton.wire.stdio_eras): a handshake connection is
served straight off stdin and still refuses a 2026-07-28 enveloped request as the SDK's own loop does;
frames before the first request reach the loop; the rule copied from the SDK is held to the SDK's."""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

from mcp.server.runner import _has_modern_envelope
from mcp_types import INVALID_REQUEST, PROTOCOL_VERSION_META_KEY

from baton.wire.stdio_eras import modern_envelope
from tests.raw_stdio import HANDSHAKE, raw_stdio

PING: dict[str, Any] = {
    "jsonrpc": "2.0",
    "method": "tools/call",
    "params": {"name": "mcp_ping", "arguments": {}},
}


def test_a_handshake_connection_refuses_an_enveloped_request_and_serves_the_next(
    baton_env: dict[str, str],
) -> None:
    enveloped = {
        **PING,
        "id": 2,
        "params": {**PING["params"], "_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28"}},
    }
    with raw_stdio(baton_env) as server:
        server.send(*HANDSHAKE, enveloped, {**PING, "id": 3})
        replies = {reply.get("id"): reply for reply in server.read_until(1, 2, 3)}
        assert server.close() == 0
    assert replies[1]["result"]["protocolVersion"] == "2025-11-25"
    assert replies[2]["error"]["code"] == INVALID_REQUEST
    assert "handshake protocol era" in replies[2]["error"]["message"]
    assert replies[3]["result"]["structuredContent"]["success"] is True


def test_a_notification_before_the_handshake_does_not_stop_the_connection(baton_env: dict[str, str]) -> None:
    early = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    with raw_stdio(baton_env) as server:
        server.send(early, *HANDSHAKE, {**PING, "id": 2})
        replies = {reply.get("id"): reply for reply in server.read_until(1, 2)}
        assert server.close() == 0
    assert replies[2]["result"]["structuredContent"]["success"] is True


def test_the_envelope_rule_is_the_sdks() -> None:
    # guards the copy of the SDK's (private) mcp.server.runner._has_modern_envelope
    samples = [
        None,
        {},
        {"name": "x"},
        {"_meta": None},
        {"_meta": {"progressToken": 1}},
        {"_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28"}},
        {"_meta": [PROTOCOL_VERSION_META_KEY]},
    ]
    for params in samples:
        assert modern_envelope(params) == _has_modern_envelope(params), params


#: The SDK functions wire/stdio_eras mirrors, by the sha256 of their source in mcp 2.3.0.
MIRRORED_SDK_SOURCE = {
    "_serve_legacy_stream": "54c353cb72ccf78ca824480e5f82e53cd6e1f41e4f568551d217f32ca5a51ed6",
    "Server.run": "e09da3b5950ebe2db537e1469380c9fa703d700f8caaae5d9c269c4bdb7990ad",
    "serve_dual_era_loop": "0d88361bcf3557f19f4027234337fc585adad0fa285135382750e411b66f4d35",
}


def test_the_sdk_loops_baton_mirrors_are_the_ones_it_was_written_against() -> None:
    # a new mcp release that changes how a stdio connection is served fails here: re-read
    # mcp.server.runner and baton.wire.stdio_eras side by side, then record the new hashes
    from mcp.server import runner
    from mcp.server.lowlevel.server import Server

    functions = (runner._serve_legacy_stream, Server.run, runner.serve_dual_era_loop)
    found = {
        function.__qualname__: hashlib.sha256(inspect.getsource(function).encode()).hexdigest()
        for function in functions
    }
    assert found == MIRRORED_SDK_SOURCE
