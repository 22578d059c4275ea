"""A proxied tools/call written on the upstream's pipes and its answer claimed by id
(baton.gateway.sandbox.direct_calls), against a real child process playing the upstream: answers out of
order, an error answer, notifications, a request of the upstream's own and an answer to an id nobody
issued mid-call (all left to the session), a malformed result, death mid-call, and a caller that gives up."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import _later_revision_fields
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED
from mcp_types.methods import validate_server_result
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from opentelemetry import context, trace

from baton.gateway.sandbox.direct_calls import DirectCalls, direct_version, later_fields, parse_result
from baton.gateway.sandbox.transport import _Lines, _Messages

pytestmark = pytest.mark.anyio

#: A hang guard, never a margin: each step finishes as soon as the child acts.
GUARD_SECONDS = 60
VERSION = "2025-11-25"

#: The upstream: each tools/call's name says how it behaves.
CHILD = r"""
import json, sys
held = None
def out(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
def text(request, value):
    return {"jsonrpc": "2.0", "id": request["id"], "result": {"content": [{"type": "text", "text": value}]}}
for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if method == "notifications/cancelled":
        out({"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "cancelled %s" % request["params"]["requestId"]}})
        continue
    if method != "tools/call":
        continue
    name = request["params"]["name"]
    if name == "echo":
        out(text(request, request["params"]["arguments"]["text"]))
    elif name == "hold":
        held = request
    elif name == "release":
        out(text(request, "released"))
        out(text(held, "held"))
    elif name == "fail":
        out({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "boom"}})
    elif name == "chatty":
        out({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
        out({"jsonrpc": "2.0", "id": 0, "method": "roots/list"})
        out({"jsonrpc": "2.0", "id": 12345, "result": {}})
        out(text(request, "after the chatter"))
    elif name == "malformed":
        out({"jsonrpc": "2.0", "id": request["id"], "result": {"content": "not a list"}})
    elif name == "stringly":
        answer = text(request, "stringly")
        answer["id"] = str(request["id"])
        out(answer)
    elif name == "meta":
        out(text(request, json.dumps(request["params"].get("_meta"))))
    elif name == "die":
        sys.exit(3)
"""


class Upstream:
    """The child, the direct calls on its pipes, and what the session's reader would have seen."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.calls = DirectCalls(_Messages(process))
        self.lines = _Lines(process, self.calls)
        self.seen: list[dict[str, Any]] = []
        self.arrived = anyio.Event()
        self.ended = anyio.Event()

    async def wait_seen(self, count: int) -> None:
        """Until the session's reader has seen ``count`` messages."""
        while len(self.seen) < count:
            await self.arrived.wait()

    async def read(self) -> None:
        """The session's receive loop: everything the direct calls did not claim."""
        try:
            while True:
                item = await self.lines.receive()
                assert isinstance(item, SessionMessage)
                self.seen.append(item.message.model_dump(by_alias=True, exclude_unset=True, mode="json"))
                self.arrived.set()
                self.arrived = anyio.Event()
        except anyio.EndOfStream:
            self.ended.set()


async def _with_upstream(test: Any) -> Upstream:
    process = await anyio.open_process(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    upstream = Upstream(process)
    with anyio.fail_after(GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(upstream.read)
            await test(upstream)
            if process.returncode is None:
                process.kill()
    await process.aclose()
    return upstream


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_call_gets_its_own_answer_and_the_session_sees_none_of_it() -> None:
    async def test(upstream: Upstream) -> None:
        result = await upstream.calls.call("echo", {"text": "hello"}, VERSION)
        assert _text(result) == "hello" and not result.is_error

    upstream = await _with_upstream(test)
    assert upstream.seen == []


async def test_an_answer_whose_id_came_back_as_a_string_still_reaches_its_caller() -> None:
    """A peer that echoes 1073741824 as "1073741824" is answered, as the SDK's dispatcher correlates it."""

    async def test(upstream: Upstream) -> None:
        assert _text(await upstream.calls.call("stringly", {}, VERSION)) == "stringly"

    upstream = await _with_upstream(test)
    assert upstream.seen == []


async def test_answers_out_of_order_reach_their_own_callers() -> None:
    answers: dict[str, str] = {}

    async def test(upstream: Upstream) -> None:
        async def call(name: str) -> None:
            answers[name] = _text(await upstream.calls.call(name, {}, VERSION))

        async with anyio.create_task_group() as group:
            group.start_soon(call, "hold")
            await anyio.wait_all_tasks_blocked()
            group.start_soon(call, "release")

    await _with_upstream(test)
    assert answers == {"hold": "held", "release": "released"}


async def test_an_error_answer_raises_the_upstreams_error() -> None:
    async def test(upstream: Upstream) -> None:
        with pytest.raises(MCPError) as raised:
            await upstream.calls.call("fail", {}, VERSION)
        assert raised.value.error.code == -32000 and raised.value.error.message == "boom"

    await _with_upstream(test)


async def test_notifications_requests_and_unknown_ids_mid_call_go_to_the_session() -> None:
    async def test(upstream: Upstream) -> None:
        assert _text(await upstream.calls.call("chatty", {}, VERSION)) == "after the chatter"

    upstream = await _with_upstream(test)
    assert [message.get("method") or message.get("id") for message in upstream.seen] == [
        "notifications/message",
        "roots/list",
        12345,
    ]


async def test_a_malformed_result_fails_validation() -> None:
    async def test(upstream: Upstream) -> None:
        with pytest.raises(ValueError, match="content"):
            await upstream.calls.call("malformed", {}, VERSION)

    await _with_upstream(test)


async def test_death_mid_call_fails_the_call_as_closed_and_every_later_one() -> None:
    async def test(upstream: Upstream) -> None:
        for _ in range(2):
            with pytest.raises(MCPError) as raised:
                await upstream.calls.call("die", {}, VERSION)
            assert raised.value.error.code == CONNECTION_CLOSED
        await upstream.ended.wait()

    await _with_upstream(test)


async def test_a_caller_that_gives_up_tells_the_upstream_and_a_late_answer_goes_to_the_session() -> None:
    async def test(upstream: Upstream) -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(upstream.calls.call, "hold", {}, VERSION)
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        # the held call is answered now, to an id nobody waits for any more
        assert _text(await upstream.calls.call("release", {}, VERSION)) == "released"
        await upstream.wait_seen(2)

    upstream = await _with_upstream(test)
    cancelled, late = upstream.seen
    assert cancelled["params"]["data"] == f"cancelled {late['id']}"
    assert late["result"]["content"][0]["text"] == "held"


async def test_the_callers_trace_context_travels_in_meta_as_the_session_sends_it() -> None:
    trace_id, span_id = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
    parent = trace.NonRecordingSpan(
        trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(1))
    )

    async def test(upstream: Upstream) -> None:
        assert json.loads(_text(await upstream.calls.call("meta", {}, VERSION))) is None
        token = context.attach(trace.set_span_in_context(parent))
        try:
            meta = json.loads(_text(await upstream.calls.call("meta", {}, VERSION)))
        finally:
            context.detach(token)
        assert meta == {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}

    await _with_upstream(test)


def test_the_fields_dropped_are_the_ones_the_sdk_session_drops() -> None:
    # guards the copy of ClientSession.send_request's (private) _later_revision_fields for tools/call
    for version in KNOWN_PROTOCOL_VERSIONS:
        assert later_fields(version) == _later_revision_fields("tools/call", version)


def test_the_result_shape_check_is_the_sdks() -> None:
    # guards the surface check against mcp_types.methods.validate_server_result, which it stands for
    samples: list[Any] = [
        {"content": [{"type": "text", "text": "x"}]},
        {"content": [{"type": "text", "text": "x"}], "isError": True, "structuredContent": {"a": 1}},
        {"content": "not a list"},
        {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
        {"content": [{"type": "text"}]},
        {},
    ]
    for version in KNOWN_PROTOCOL_VERSIONS:
        for raw in samples:
            try:
                validate_server_result("tools/call", version, raw)
                expected: type[Exception] | None = None
            except (ValueError, KeyError) as exc:
                expected = type(exc)
            try:
                parse_result(dict(raw), version)
                got: type[Exception] | None = None
            except ValueError as exc:
                got = type(exc)
            assert (got is None) == (expected is None) or expected is KeyError, (version, raw, got, expected)


def test_only_a_known_legacy_version_goes_direct() -> None:
    assert direct_version(VERSION)
    assert not direct_version("2026-07-28") and not direct_version("1999-01-01") and not direct_version(None)


class _Recorder:
    """A session and a pipe's direct calls that say which one a call took."""

    def __init__(self) -> None:
        self.took: list[str] = []
        self.calls = self

    async def call(self, tool: str, arguments: dict[str, Any], version: str) -> types.CallToolResult:
        self.took.append("direct")
        return types.CallToolResult(content=[])

    async def validate_tool_result(self, tool: str, result: types.CallToolResult) -> None:
        self.took.append("validated")

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], progress_callback: Any
    ) -> types.CallToolResult:
        self.took.append("session")
        return types.CallToolResult(content=[])


@pytest.mark.parametrize(
    ("version", "progress", "exporting", "took"),
    [
        (VERSION, False, False, ["direct", "validated"]),
        (VERSION, True, False, ["session"]),
        (VERSION, False, True, ["session"]),
        ("2026-07-28", False, False, ["session"]),
        (None, False, False, ["session"]),
    ],
)
async def test_a_call_takes_the_direct_path_only_when_it_may(
    monkeypatch: pytest.MonkeyPatch, version: str | None, progress: bool, exporting: bool, took: list[str]
) -> None:
    from pathlib import Path

    from baton.gateway.serving.upstream import Upstream
    from baton.telemetry import tracing

    monkeypatch.setattr(tracing, "active", lambda: exporting)
    recorder = _Recorder()
    upstream = Upstream(Any, Any, lambda error, evidence: None, Path("unused"))  # type: ignore[arg-type]
    upstream.pipe, upstream.version = recorder, version  # type: ignore[assignment]

    async def report(value: float, total: float | None, message: str | None) -> None:
        """Never called here."""

    await upstream._send(recorder, "echo", {}, report if progress else None)
    assert recorder.took == took
