"""HTTP guards of ``baton serve --http`` over real loopback sockets: body limits (413), non-ASCII values
(403, never 500), Host/Origin checks on every loopback bind (421/403) and uvicorn's logs redacted."""

from __future__ import annotations

import contextlib
import json
import re
import socket
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, http_server

TOKEN = "guards-test-token-0123456789abcdef-XYZ"
AGENT_TOKEN = "guards-agent-token-9876543210fedcba-XYZ"


def _raw(port: int, request: bytes, *, host: str = "127.0.0.1", then: bytes = b"") -> tuple[int, bytes]:
    """Send ``request`` (and ``then``, ignoring a peer that already closed), return the status and body."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request)
        with contextlib.suppress(OSError):
            sock.sendall(then)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, rest = data.partition(b"\r\n\r\n")
                match = re.search(rb"content-length: (\d+)", head, re.I)
                if match and len(rest) >= int(match.group(1)):
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.fixture
def server(baton_env: dict[str, str], tmp_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": TOKEN}  # TOKEN logs in
    with http_server(env, f"127.0.0.1:{port}", tmp_path) as process:
        yield port, process


def test_a_declared_huge_body_is_refused_before_it_is_read(server) -> None:  # type: ignore[no-untyped-def]
    port, process = server
    for path in ("/inbox/link", "/inbox/login", "/inbox/logout", "/inbox/requests/x/decide", "/mcp"):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 314572800\r\n\r\n"
        ).encode()
        status, body = _raw(port, head, then=b"a" * 65536)
        assert status == 413, (path, body)
        assert json.loads(body)["error_class"] == "http_body_too_large"
    assert process.poll() is None


def test_a_chunked_body_is_cut_off_at_the_limit(server) -> None:  # type: ignore[no-untyped-def]
    port, _process = server
    chunk = b"a" * 32768
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4))  # 128 KiB > 64 KiB
    head = (
        f"POST /inbox/login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    status, body = _raw(port, head + chunks)
    assert status == 413 and json.loads(body)["limit_bytes"] == 64 * 1024
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * (5 * 1024 * 1024)}}
    payload = json.dumps(big).encode()
    mcp = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    pieces = [payload[i : i + 65536] for i in range(0, len(payload), 65536)]
    status, body = _raw(
        port, mcp, then=b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    )
    assert status == 413 and json.loads(body)["limit_bytes"] == 4 * 1024 * 1024
    login = httpx.post(f"http://127.0.0.1:{port}/inbox/login", data={"token": TOKEN})
    assert login.status_code == 303  # an ordinary form still gets through


def test_non_ascii_tokens_are_refused_not_crashed(server) -> None:  # type: ignore[no-untyped-def]
    port, process = server
    base = f"http://127.0.0.1:{port}"
    link = httpx.get(f"{base}/inbox/link", params={"r": "hr_1", "e": "9999999999", "n": "abc", "s": "é"})
    assert link.status_code == 403 and "hitl_link_invalid" in link.text
    sup = httpx.get(f"{base}/inbox/link", params={"r": "hr_1", "e": "²", "n": "abc", "s": "x"})
    assert sup.status_code == 403
    posted = httpx.post(
        f"{base}/inbox/link", data={"r": "hr_1", "e": "9999999999", "n": "n", "s": "ü", "csrf": "ß"}
    )
    assert posted.status_code == 403
    cookie = httpx.get(f"{base}/inbox", headers={"Cookie": "baton_inbox=abc.99999999999.%C3%A9"})
    assert cookie.status_code == 303  # an unreadable session is no session: to the login page
    raw_cookie, _ = _raw(
        port,
        f"GET /inbox HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        + b"Cookie: baton_inbox=a.1.\xc3\xa9\r\n\r\n",
    )
    assert raw_cookie == 303
    with httpx.Client(base_url=base, follow_redirects=False) as client:
        assert client.post("/inbox/login", data={"token": TOKEN}).status_code == 303
        decide = client.post("/inbox/requests/hr_x/decide", data={"action": "approve", "csrf": "ñ"})
        assert decide.status_code == 403 and "hitl_csrf_invalid" in decide.text
        logout = client.post("/inbox/logout", data={"csrf": "€"})
        assert logout.status_code == 403
        login_utf8 = httpx.post(f"{base}/inbox/login", data={"token": "tökén"})
        assert login_utf8.status_code == 401
    assert process.poll() is None


@pytest.mark.parametrize("bind_host", ["127.0.0.1", "127.0.0.2"])
def test_loopback_binds_refuse_foreign_hosts_and_origins(
    baton_env: dict[str, str], tmp_path: Path, bind_host: str
) -> None:
    port = free_port()
    with http_server(baton_env, f"{bind_host}:{port}", tmp_path):
        base = f"http://{bind_host}:{port}"
        for path in ("/inbox/login", "/mcp"):
            evil = httpx.get(f"{base}{path}", headers={"Host": f"evil.example:{port}"})
            assert evil.status_code == 421, path
            assert evil.json()["error_class"] == "http_host_refused"
            cross = httpx.get(f"{base}{path}", headers={"Origin": f"http://evil.example:{port}"})
            assert cross.status_code == 403, path
        assert httpx.get(f"{base}/inbox/login").status_code == 200
        assert httpx.get(f"{base}/inbox/login", headers={"Host": f"localhost:{port}"}).status_code == 200
        same = httpx.get(f"{base}/inbox/login", headers={"Origin": f"http://{bind_host}:{port}"})
        assert same.status_code == 200
        listed = httpx.post(
            f"{base}/mcp",
            headers={
                "Host": f"evil.example:{port}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        assert listed.status_code == 421


def test_uvicorn_logs_go_through_the_redacting_formatter(baton_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env = {**baton_env, "BATON_HTTP_TOKEN": TOKEN}
    with http_server(env, f"127.0.0.1:{port}", tmp_path):
        status, _ = _raw(port, b"NOT-HTTP " + TOKEN.encode() + b"\x00\r\n\r\n")
        assert status == 400
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert re.search(r"WARNING uvicorn\.error: Invalid HTTP request received", log), log
    assert TOKEN not in log
