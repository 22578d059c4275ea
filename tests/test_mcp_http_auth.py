"""``/mcp`` without valid credentials: 401, ``error_class: http_unauthorized`` and a Bearer challenge."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from baton.wire.http_serve import BearerTokenMiddleware


async def reached(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"reached"})


def test_a_missing_or_wrong_token_gets_401_with_the_http_class_and_a_bearer_challenge() -> None:
    client = TestClient(BearerTokenMiddleware(reached, "agent-token-0123456789", "admin-token-9876543210"))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        refused = client.post("/mcp", headers=headers)
        assert refused.status_code == 401
        assert refused.json() == {
            "success": False,
            "error": "A valid bearer token is required.",
            "error_class": "http_unauthorized",
        }
        assert refused.headers["www-authenticate"] == 'Bearer realm="baton", error="invalid_token"'
    for token in ("agent-token-0123456789", "admin-token-9876543210"):
        assert client.post("/mcp", headers={"Authorization": f"Bearer {token}"}).text == "reached"
    assert client.get("/inbox").text == "reached"  # only /mcp is guarded here; the inbox has its own login
