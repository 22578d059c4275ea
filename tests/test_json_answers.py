"""baton.wire.json_answers: a quiet tool's call over streamable HTTP is answered as one JSON body, every
other request as before, and a call answered so has no stream to write anything else to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from baton.wire.json_answers import PER_REQUEST, JsonAnswers, answered_as_json
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

BOTH = b"application/json, text/event-stream"
PROTOCOL = "2025-11-25"


def call(name: str, **params: Any) -> bytes:
    """A tools/call request's body."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, **params}}
    return json.dumps(body).encode()


async def decide(
    body: bytes | list[bytes],
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    method: str = "POST",
    path: str = "/mcp",
) -> tuple[bool, bytes]:
    """Whether the app saw the request answered as JSON, and the body it read."""
    chunks = [body] if isinstance(body, bytes) else body
    messages = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["json"] = answered_as_json()
        read = b""
        while True:
            message = await receive()
            read += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen["body"] = read

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        return None

    if headers is None:
        headers = [(b"accept", BOTH), (b"mcp-session-id", b"abc"), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    await JsonAnswers(app, lambda name: name == "mcp_ping")(scope, receive, send)
    assert answered_as_json() is False  # never past the request
    return bool(seen["json"]), seen["body"]


async def test_a_quiet_tools_call_in_a_session_is_answered_as_json_and_its_body_reaches_the_app() -> None:
    body = call("mcp_ping", arguments={"message": "hi"})
    assert await decide(body) == (True, body)


@pytest.mark.parametrize(
    "body",
    [
        call("mcp_set_timer", arguments={}),  # not quiet
        call("no_such_tool"),
        call("mcp_ping", task={"ttl": 1000}),  # a task: its answer is the task, its work outlives the POST
        json.dumps([json.loads(call("mcp_ping"))]).encode(),  # a batch
        json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "mcp_ping"}}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
        b"{not json",
    ],
)
async def test_every_other_body_keeps_the_stream(body: bytes) -> None:
    assert await decide(body) == (False, body)


async def test_a_body_in_more_than_one_chunk_keeps_the_stream_and_reaches_the_app_whole() -> None:
    body = call("mcp_ping")
    assert await decide([body[:10], body[10:]]) == (False, body)


@pytest.mark.parametrize(
    "headers",
    [
        [(b"accept", BOTH)],  # no session yet: the request that opens one
        [(b"accept", b"application/json"), (b"mcp-session-id", b"abc")],
        [(b"accept", b"text/event-stream"), (b"mcp-session-id", b"abc")],
    ],
)
async def test_a_request_outside_a_session_or_not_accepting_both_keeps_the_stream(
    headers: list[tuple[bytes, bytes]],
) -> None:
    assert (await decide(call("mcp_ping"), headers=headers))[0] is False


@pytest.mark.parametrize(("method", "path"), [("GET", "/mcp"), ("POST", "/inbox/login")])
async def test_other_methods_and_routes_pass_through(method: str, path: str) -> None:
    assert (await decide(call("mcp_ping"), method=method, path=path))[0] is False


def test_a_call_answered_as_json_gets_no_progress_reporter_and_no_session() -> None:
    from baton.config import Settings
    from baton.wire import json_answers
    from baton.wire.server import _call_context

    session = SimpleNamespace(report_progress=object(), client_capabilities=None)
    ctx = SimpleNamespace(session=session, request=None, protocol_version=PROTOCOL)
    params = types.CallToolRequestParams(name="mcp_ping", arguments={}, _meta={"progressToken": 1})
    settings = Settings()
    streamed = _call_context(ctx, params, None, settings)
    assert streamed.session is session and streamed.progress.wanted
    token = json_answers._ANSWERED_AS_JSON.set(True)
    try:
        answered = _call_context(ctx, params, None, settings)
    finally:
        json_answers._ANSWERED_AS_JSON.reset(token)
    assert answered.session is None and not answered.progress.wanted


def test_the_sdk_keeps_the_flag_it_is_given_and_reads_it_per_request() -> None:
    """Guards the SDK behaviour baton relies on (docs/benchmarks.md, #51: streamable HTTP throughput): the
    session manager and each session's transport keep ``json_response`` as given, not as ``bool(...)``."""
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    server: Server[Any] = Server("flag")
    server.streamable_http_app(json_response=PER_REQUEST)  # type: ignore[arg-type]
    assert server.session_manager.json_response is PER_REQUEST
    transport = StreamableHTTPServerTransport("abc", is_json_response_enabled=PER_REQUEST)  # type: ignore[arg-type]
    assert transport.is_json_response_enabled is PER_REQUEST


@pytest.fixture
def fixtures_url(baton_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``baton serve --http`` with the conformance fixtures (tools that report progress and log)."""
    bind = f"127.0.0.1:{free_port()}"
    with http_server({**baton_env, "BATON_CONFORMANCE_FIXTURES": "1"}, bind, tmp_path):
        yield f"http://{bind}/mcp"


async def open_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """initialize and notifications/initialized; the headers of the session's later requests."""
    headers = {"accept": BOTH.decode(), "content-type": "application/json"}
    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    response = await http.post(url, json=opening, headers=headers)
    assert response.headers["content-type"].startswith("text/event-stream")
    headers |= {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def messages(response: httpx.Response) -> tuple[str, list[dict[str, Any]]]:
    """The answer's media type and its JSON-RPC messages in order."""
    kind = response.headers["content-type"].split(";")[0]
    if kind == "application/json":
        return kind, [response.json()]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return kind, [json.loads(line) for line in data if line]


async def test_pings_answered_as_json_beside_calls_that_stream_progress_and_logs_on_one_session(
    fixtures_url: str,
) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        headers = await open_session(http, fixtures_url)
        answers: dict[int, tuple[str, list[dict[str, Any]]]] = {}

        async def tool(request_id: int, name: str, params: dict[str, Any]) -> None:
            body = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, **params},
            }
            answers[request_id] = messages(await http.post(fixtures_url, json=body, headers=headers))

        with anyio.fail_after(120):  # a hang guard, not a timing
            async with anyio.create_task_group() as group:
                for request_id in range(10, 16):
                    group.start_soon(
                        tool, request_id, "mcp_ping", {"arguments": {"message": str(request_id)}}
                    )
                progress = {"arguments": {}, "_meta": {"progressToken": "p"}}
                group.start_soon(tool, 20, "test_tool_with_progress", progress)
                group.start_soon(tool, 21, "test_tool_with_logging", {"arguments": {}})
    for request_id in range(10, 16):
        kind, [pong] = answers[request_id]
        assert kind == "application/json"
        assert pong["id"] == request_id
        assert pong["result"]["structuredContent"]["message"] == str(request_id)
    kind, streamed = answers[20]
    assert kind == "text/event-stream"
    steps = [m["params"]["progress"] for m in streamed if m.get("method") == "notifications/progress"]
    assert steps == [0, 50, 100] and streamed[-1]["id"] == 20
    kind, logged = answers[21]
    assert kind == "text/event-stream"
    assert [m["method"] for m in logged[:-1]] == ["notifications/message"] * 3 and logged[-1]["id"] == 21
