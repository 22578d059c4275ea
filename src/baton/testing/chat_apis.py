"""Loopback stand-ins for the Slack Web API and the Telegram Bot API, speaking their shapes on 127.0.0.1.

:class:`FakeSlack` answers ``POST /api/chat.postMessage`` as Slack does (a bearer bot token, JSON or form
body, ``{"ok": true, "channel", "ts", "message"}``; ``invalid_auth`` for another token) and records what
arrives at ``/actions/…``, the ``response_url`` it hands out. :func:`slack_signed` builds an
interactivity callback exactly as Slack sends it: a ``payload=`` form body signed with the app's signing
secret (``v0=HMAC-SHA256(secret, "v0:{timestamp}:{body}")``), computed here with :mod:`hmac`, not with
the SDK that baton verifies it with. :class:`FakeTelegram` answers ``/bot<token>/<method>`` for
``sendMessage``, ``answerCallbackQuery``, ``editMessageText``, ``setWebhook`` and ``getWebhookInfo``
(``401 Unauthorized`` for another token), and :func:`telegram_callback_update` builds the update Telegram posts to a webhook when a user
presses an inline button. Use them as context managers; BATON_SLACK_API_URL is ``slack.api_url``,
BATON_TELEGRAM_API_URL is ``telegram.base_url``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Self
from urllib.parse import parse_qs, urlencode, urlsplit

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


@dataclass
class ApiCall:
    """One call as the fake saw it: the method (or path), its headers and its parsed body."""

    method: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class _Recorder:
    calls: list[ApiCall] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _httpd: LoopbackHTTPServer | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._httpd is not None, "not started"
        return self._httpd.base_url

    def record(self, call: ApiCall) -> None:
        with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def wait_for(self, method: str, count: int = 1, timeout: float = 300.0) -> list[ApiCall]:
        """Block until ``count`` calls of ``method`` arrived (AssertionError after ``timeout``, a hang guard)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.of(method)) >= count, timeout):
                raise AssertionError(f"expected {count} {method} calls, saw {[c.method for c in self.calls]}")
            return self.of(method)

    def of(self, method: str) -> list[ApiCall]:
        """The calls of ``method`` so far."""
        return [call for call in self.calls if call.method == method]

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class this fake answers with."""
        raise NotImplementedError

    def start(self) -> Self:
        """Listen on an ephemeral port of 127.0.0.1."""
        self._httpd = serve_in_thread(self.handler(), type(self).__name__)
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._httpd is not None:
            self._httpd.close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _body(handler: BaseHTTPRequestHandler) -> tuple[bytes, dict[str, Any]]:
    length = int(handler.headers.get("content-length") or 0)
    raw = handler.rfile.read(length) if length else b""
    kind = handler.headers.get("content-type", "")
    if "json" in kind:
        parsed = json.loads(raw or b"{}")
    else:
        parsed = {key: values[0] for key, values in parse_qs(raw.decode()).items()}
    return raw, parsed if isinstance(parsed, dict) else {"_": parsed}


def _answer(
    handler: BaseHTTPRequestHandler, status: int, payload: Any, kind: str = "application/json"
) -> None:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", kind)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@dataclass
class FakeSlack(_Recorder):
    """The Slack Web API's ``chat.postMessage`` and an interaction ``response_url``, for one bot token."""

    token: str = "xoxb-test"  # noqa: S105 (the fake accepts this made-up token unless told another)
    _ts: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def api_url(self) -> str:
        """The Web API base (what BATON_SLACK_API_URL takes)."""
        return self.base_url + "/api/"

    def response_url(self, name: str = "1") -> str:
        """A ``response_url`` of this fake (what Slack puts in an interaction payload)."""
        return f"{self.base_url}/actions/T0TEST/{name}/response-secret"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """Answers as the Slack Web API."""
        return _slack_handler(self)


def _slack_handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            _raw, body = _body(self)
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = urlsplit(self.path).path
            if path.startswith("/actions/"):
                fake.record(ApiCall("response_url", headers, body))
                _answer(self, 200, b"ok", "text/plain")
                return
            method = path.removeprefix("/api/")
            if headers.get("authorization") != f"Bearer {fake.token}":
                _answer(self, 200, {"ok": False, "error": "invalid_auth"})
                return
            if method != "chat.postMessage":
                _answer(self, 200, {"ok": False, "error": "unknown_method"})
                return
            if not body.get("channel"):
                _answer(self, 200, {"ok": False, "error": "channel_not_found"})
                return
            fake.record(ApiCall(method, headers, body))
            ts = f"{int(time.time())}.{next(fake._ts):06d}"
            message = {"type": "message", "text": body.get("text"), "blocks": body.get("blocks"), "ts": ts}
            _answer(self, 200, {"ok": True, "channel": body["channel"], "ts": ts, "message": message})

    return Handler


def slack_signed(
    secret: str, payload: dict[str, Any], timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """An interactivity callback as Slack sends it: the form body and its signed headers."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": f"v0={digest}",
    }
    return body, headers


def slack_block_actions(
    posted: dict[str, Any], user_id: str, action_id: str, response_url: str, team_id: str = "T0TEST"
) -> dict[str, Any]:
    """The ``block_actions`` payload of a press on the button ``action_id`` of a posted message, by a
    member of the workspace ``team_id``."""
    blocks = posted.get("blocks") or []
    buttons = [e for b in blocks if b.get("type") == "actions" for e in b.get("elements", [])]
    button = next(e for e in buttons if e.get("action_id") == action_id)
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_id.lower(), "team_id": team_id},
        "team": {"id": team_id, "domain": "test"},
        "api_app_id": "A0TEST",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "channel_id": posted.get("channel"), "is_ephemeral": False},
        "channel": {"id": posted.get("channel"), "name": "approvals"},
        "message": {"type": "message", "text": posted.get("text"), "blocks": blocks, "ts": "1.000001"},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "baton_decide",
                "text": button["text"],
                "value": button["value"],
                "action_ts": str(time.time()),
            }
        ],
    }


@dataclass
class FakeTelegram(_Recorder):
    """The Telegram Bot API (``sendMessage``, ``answerCallbackQuery``, ``editMessageText``) for one token."""

    token: str = "123:test"  # noqa: S105 (the fake accepts this made-up token unless told another)
    _ids: Any = field(default_factory=lambda: itertools.count(100))
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: What ``getWebhookInfo`` answers (``setWebhook`` replaces it); no webhook at first.
    webhook: dict[str, Any] = field(
        default_factory=lambda: {"url": "", "has_custom_certificate": False, "pending_update_count": 0}
    )

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """Answers as the Telegram Bot API."""
        return _telegram_handler(self)


def _telegram_handler(fake: FakeTelegram) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            _raw, body = _body(self)
            headers = {k.lower(): v for k, v in self.headers.items()}
            bot, _, method = urlsplit(self.path).path.strip("/").partition("/")
            if bot != f"bot{fake.token}":
                _answer(self, 401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
                return
            if method == "sendMessage":
                message_id = next(fake._ids)
                chat = {"id": int(body["chat_id"]) if str(body["chat_id"]).lstrip("-").isdigit() else 0}
                message = {
                    "message_id": message_id,
                    "date": int(time.time()),
                    "chat": chat,
                    "text": body["text"],
                }
                if "reply_markup" in body:
                    message["reply_markup"] = body["reply_markup"]
                fake.messages[message_id] = message
                result: Any = message
            elif method == "answerCallbackQuery":
                result = True
            elif method == "setWebhook":
                fake.webhook = {
                    "url": body["url"],
                    "has_custom_certificate": False,
                    "pending_update_count": 0,
                    "allowed_updates": body.get("allowed_updates") or ["message", "callback_query"],
                }
                result = True
            elif method == "getWebhookInfo":
                result = fake.webhook
            elif method == "editMessageText":
                known = fake.messages.get(int(body.get("message_id") or 0))
                if known is None:
                    _answer(self, 400, {"ok": False, "error_code": 400, "description": "message not found"})
                    return
                known.update(text=body.get("text"))
                known.pop("reply_markup", None)
                if "reply_markup" in body:
                    known["reply_markup"] = body["reply_markup"]
                result = known
            else:
                _answer(self, 404, {"ok": False, "error_code": 404, "description": "Not Found"})
                return
            fake.record(ApiCall(method, headers, body))
            _answer(self, 200, {"ok": True, "result": result})

    return Handler


def telegram_callback_update(
    message: dict[str, Any], user_id: int, data: str, update_id: int = 1
) -> dict[str, Any]:
    """The update Telegram posts to the webhook when ``user_id`` presses the button with ``data``."""
    return {
        "update_id": update_id,
        "callback_query": {
            "id": f"cbq-{update_id}-{user_id}",
            "from": {"id": user_id, "is_bot": False, "first_name": "Tester"},
            "message": message,
            "chat_instance": "-42",
            "data": data,
        },
    }
