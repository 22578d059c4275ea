"""A real OpenAI-compatible chat-completions server on 127.0.0.1.

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) with ids and usage,
records every request body, and can be told to be slow, fail with a status, send malformed
JSON or hang, either for every request or for requests whose text contains a marker.
A behavior can also answer with OpenAI-format ``tool_calls`` from a script (one round per model call
after the last user message), then, once the tool results arrived, with a final text that may quote
them, so tests drive real tool loops offline. It notices when a client hangs up during a slow answer, so tests can prove a cancel
reached the wire. It counts the requests in flight (and the most ever at once), and can hold every
answer until released, so a test proves concurrency by overlap instead of by elapsed time.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Behavior:
    """How to answer one request: a delay, then a reply, an error status, malformed JSON or silence.

    ``tool_rounds[i]`` is what the model asks for after ``i`` earlier tool rounds of the current user turn
    (each round one assistant message with ``tool_calls``); past the script it answers with text:
    ``after_tools`` with ``{tool_results}`` replaced by the tool messages' contents, joined by newlines.
    """

    delay_seconds: float = 0.0
    status: int = 200
    malformed: bool = False
    reply: str | None = None
    tool_rounds: list[list[ToolCall]] = field(default_factory=list)
    after_tools: str = "Tool results: {tool_results}"

    @classmethod
    def calling(
        cls, name: str, arguments: dict[str, Any] | None = None, *, then: str | None = None
    ) -> Behavior:
        """Answer the first model call of a turn with one tool call, and the next with text."""
        script = cls(tool_rounds=[[ToolCall(name, arguments or {})]])
        if then is not None:
            script.after_tools = then
        return script


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    aborted: bool = False
    #: ``time.perf_counter()`` when the body had been read, and when a successful answer was handed to the
    #: socket (None: none was, e.g. the client hung up, or the answer was an error).
    received_at: float = 0.0
    answered_at: float | None = None
    #: The body's bytes as they arrived.
    raw: bytes = b""


@dataclass
class FakeLLMServer:
    """A threaded loopback HTTP server; use as a context manager or call start()/stop()."""

    default: Behavior = field(default_factory=Behavior)
    rules: list[tuple[str, Behavior]] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: LoopbackHTTPServer | None = None
    #: Chat-completion requests being answered now, and the most there ever were at once.
    in_flight: int = 0
    max_in_flight: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _released: threading.Event = field(default_factory=lambda: _set(threading.Event()))

    def hold(self) -> None:
        """Keep every chat-completion answer waiting (after it is counted in flight) until :meth:`release`."""
        self._released.clear()

    def release(self) -> None:
        """Let held and later answers go."""
        self._released.set()

    def wait_for_in_flight(self, count: int, timeout: float = 300.0) -> bool:
        """Wait until at least ``count`` requests are in flight at once; False when ``timeout`` passes first."""
        with self._changed:
            return self._changed.wait_for(lambda: self.in_flight >= count, timeout)

    def _enter(self) -> None:
        with self._changed:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._changed.notify_all()

    def _leave(self) -> None:
        with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    @property
    def base_url(self) -> str:
        """The ``/v1`` endpoint, as ``OPENAI_BASE_URL`` takes it."""
        assert self._httpd is not None, "server not started"
        return f"{self._httpd.base_url}/v1"

    def when(self, marker: str, behavior: Behavior) -> None:
        """Answer requests whose text contains ``marker`` with ``behavior``."""
        self.rules.append((marker, behavior))

    def start(self) -> FakeLLMServer:
        """Listen on an ephemeral port of 127.0.0.1 in a daemon thread."""
        self._httpd = serve_in_thread(_make_handler(self), "fake-llm")
        return self

    def stop(self) -> None:
        """Stop listening (held answers are released first)."""
        self.release()
        if self._httpd is not None:
            self._httpd.close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def all_request_text(self) -> str:
        """Every recorded request body, serialized, for searching."""
        with self._lock:
            return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in self.requests)

    def behavior_for(self, body: dict[str, Any]) -> Behavior:
        """The first rule whose marker occurs in the request's text, else the default."""
        text = json.dumps(body, ensure_ascii=False)
        for marker, behavior in self.rules:
            if marker in text:
                return behavior
        return self.default

    def answer(self, body: dict[str, Any], behavior: Behavior) -> dict[str, Any]:
        """A chat-completion object with an id, the model and usage counted from the prompt."""
        messages = body.get("messages") or []
        prompt_text = " ".join(_message_text(m) for m in messages)
        last_user = next((_message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
        rounds, results = _tool_progress(messages)
        message: dict[str, Any]
        if behavior.tool_rounds and rounds < len(behavior.tool_rounds):
            calls = [
                {
                    "id": f"call_{next(self._ids):06d}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in behavior.tool_rounds[rounds]
            ]
            content = " ".join(call.name for call in behavior.tool_rounds[rounds])
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            finish = "tool_calls"
        else:
            if behavior.tool_rounds:
                content = behavior.after_tools.replace("{tool_results}", "\n".join(results))
            elif behavior.reply is not None:
                content = behavior.reply
            else:
                content = _default_reply(last_user, len(messages))
            message = {"role": "assistant", "content": content}
            finish = "stop"
        prompt_tokens = max(1, len(prompt_text.split()))
        completion_tokens = max(1, len(content.split()))
        return {
            "id": f"chatcmpl-fake-{next(self._ids):06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _tool_progress(messages: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """Tool rounds since the last user message, and the contents of their tool results."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    since = messages[last_user + 1 :]
    rounds = sum(1 for m in since if m.get("role") == "assistant" and m.get("tool_calls"))
    return rounds, [_message_text(m) for m in since if m.get("role") == "tool"]


def _default_reply(last_user: str, message_count: int) -> str:
    excerpt = " ".join(last_user.split())[:400]
    return f"[fake-model turn with {message_count} messages] Considered: {excerpt}"


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: The status line and headers, then the body, are two writes: with Nagle's algorithm on, the body
        #: waits for the client's (delayed) ACK of the headers, up to 40 ms on Linux, on every answer.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            received_at = time.perf_counter()
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = RecordedRequest(self.path, body, headers, received_at=received_at, raw=raw)
            with server._lock:
                server.requests.append(record)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error":{"message":"not found"}}')
                return
            behavior = server.behavior_for(body)
            server._enter()
            try:
                self._answer(record, body, behavior)
            finally:
                server._leave()

        def _answer(self, record: RecordedRequest, body: dict[str, Any], behavior: Behavior) -> None:
            while not server._released.wait(0.05):
                if self._hung_up():
                    record.aborted = True
                    return
            if behavior.delay_seconds and not self._wait_unless_hung_up(behavior.delay_seconds):
                record.aborted = True
                return
            if behavior.status != 200:
                error = {"error": {"message": f"fake failure {behavior.status}", "type": "server_error"}}
                self._send(behavior.status, json.dumps(error).encode())
            elif behavior.malformed:
                self._send(200, b'{"id": "chatcmpl-broken", "choices": [ {"message": ')
            else:
                payload = json.dumps(server.answer(body, behavior)).encode()
                record.answered_at = time.perf_counter()  # before the write: the client may be done first
                self._send(200, payload)

        def _hung_up(self) -> bool:
            """Whether the client closed the connection (without waiting)."""
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            try:
                return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
            except OSError:
                return True

        def _wait_unless_hung_up(self, seconds: float) -> bool:
            """Sleep up to ``seconds``; False as soon as the client closes the connection."""
            deadline = time.monotonic() + seconds
            poller = select.poll()  # not select(): it fails for descriptors past 1024 connections
            poller.register(self.connection, select.POLLIN)
            while (remaining := deadline - time.monotonic()) > 0:
                if poller.poll(min(remaining, 0.05) * 1000):
                    try:
                        if self.connection.recv(1, socket.MSG_PEEK) == b"":
                            return False
                    except OSError:
                        return False
            return True

        def _send(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                return

    return Handler
