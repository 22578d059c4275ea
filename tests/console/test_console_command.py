"""``baton console``: loopback only, the local store, no MCP endpoint, the inbox's login."""

from __future__ import annotations

import subprocess
import sys

import httpx

from tests.hitl.helpers import free_port
from tests.test_serve_terminal import read_stderr_until


def test_baton_console_refuses_a_non_loopback_address(baton_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "baton", "console", "--bind", "0.0.0.0:8766"],
        env=baton_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert "http_bind_refused" in done.stderr


def test_baton_console_serves_the_console_on_loopback_with_a_one_run_token(baton_env: dict[str, str]) -> None:
    port = free_port()
    agent_token = "the-agents-own-token-0123456789abcdef"
    process = subprocess.Popen(
        [sys.executable, "-m", "baton", "console", "--bind", f"127.0.0.1:{port}"],
        env={**baton_env, "BATON_HTTP_TOKEN": agent_token},  # the agent's token is not a console login
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = read_stderr_until(process, b"not stored anywhere): ").decode()
        if "\n" not in seen.split("not stored anywhere): ", 1)[1]:  # the token's line may be whole already
            seen += read_stderr_until(process, b"\n").decode()
        assert f"http://localhost:{port}/inbox/console" in seen  # a passkey's relying party is no IP
        token = seen.split("not stored anywhere): ", 1)[1].split()[0]
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as client:
            assert client.get("/inbox/console/requests").status_code == 303
            assert client.post("/mcp", json={}).status_code == 404
            for refused in (
                client.post("/inbox/login", data={"token": agent_token}, headers={"Origin": base}),
                client.get("/inbox/console/requests", headers={"Authorization": f"Bearer {agent_token}"}),
            ):
                assert refused.status_code in (401, 303) and "baton_inbox" not in refused.cookies
                assert refused.headers.get("location", "/inbox/login").split("?")[0] == "/inbox/login"
            login = client.post("/inbox/login", data={"token": token}, headers={"Origin": base})
            assert login.status_code == 303
            page = client.get("/inbox/console/requests")
            assert page.status_code == 200
            assert "Waiting for a decision" in page.text
            assert page.headers["content-security-policy"].startswith("default-src 'none'")
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=300)
    assert stdout == b""
