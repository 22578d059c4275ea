"""Raw JSON-RPC edges get an answer, over a raw stdio pipe and over HTTP: deep nesting, a lone
surrogate, a 5000-digit integer and garbage each get -32700/-32602/-32600, and the server lives on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.raw_stdio import HANDSHAKE, raw_stdio
from tests.servers import free_port, http_server

PING = '{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"mcp_ping","arguments":{{"message":{value}}}}}}}'
HOSTILE = {
    2: PING.format(id=2, value="[" * 250 + "]" * 250),
    3: PING.format(id=3, value='"\\ud800"'),
    4: PING.format(id=4, value="9" * 5000),
    6: '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp_ping","arguments":[1,2]}}',
    5: '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp_ping","arguments":{"x":'
    + '{"a":' * 300
    + "1"
    + "}" * 300
    + "}}}",
}


def test_every_hostile_line_on_stdio_gets_an_error_reply(baton_env: dict[str, str]) -> None:
    lines = [json.dumps(m) for m in HANDSHAKE] + list(HOSTILE.values())
    lines += [
        "not json at all",
        "[1, 2, 3]",
        '{"jsonrpc":"2.0","method":"notifications/x","params":' + "[" * 250 + "]" * 250 + "}",
        '{"jsonrpc":"2.0","id":' + "7" * 5000 + ',"method":"ping"}',
        '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp_ping","arguments":{}}}',
    ]
    with raw_stdio(baton_env) as server:
        server.send_bytes("".join(line + "\n" for line in lines).encode())
        replies = server.read_until(9)
        assert server.close() == 0
    by_id = {reply.get("id"): reply for reply in replies if reply.get("id") is not None}
    for request_id in HOSTILE:
        assert by_id[request_id]["error"]["code"] in (-32700, -32602), by_id[request_id]
    nulls = [reply["error"]["code"] for reply in replies if reply.get("id") is None]
    # garbage: parse error; an array: invalid request; the huge id cannot be echoed: invalid request;
    # the unreadable notification gets no reply (JSON-RPC never answers a notification)
    assert sorted(nulls) == [-32700, -32600, -32600]
    assert by_id[9]["result"]["structuredContent"]["success"] is True


def test_every_hostile_body_over_http_gets_an_error_reply(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    with http_server(baton_env, f"127.0.0.1:{port}", tmp_path):
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        url = f"http://127.0.0.1:{port}/mcp"
        for body in [*HOSTILE.values(), "not json"]:
            response = httpx.post(url, content=body, headers=headers)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] in (-32700, -32600, -32602)
        initialize = httpx.post(url, json=HANDSHAKE[0], headers=headers)
        assert initialize.status_code == 200


def test_an_oversized_stdin_line_is_dropped_unparsed_and_answered(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_MAX_MESSAGE_BYTES": "100000"}
    huge = PING.format(id=7, value=json.dumps("z" * 3_000_000))
    fine = PING.format(id=8, value=json.dumps("small"))
    with raw_stdio(env) as server:
        server.send(*HANDSHAKE)
        server.send_bytes((huge + "\n" + fine + "\n").encode())
        replies = {message.get("id"): message for message in server.read_until(8)}
        assert server.close() == 0
    assert (
        replies[7]["error"]["code"] == -32600 and "BATON_MAX_MESSAGE_BYTES" in replies[7]["error"]["message"]
    )
    assert replies[8]["result"]["structuredContent"]["message"] == "small"
