"""A real OAuth authorization server on 127.0.0.1 for tests: RFC 8414 metadata, a JWKS, and signed tokens.

Keys are made with ``cryptography`` (RSA and EC); tokens are signed with PyJWT. ``rotate()`` publishes a
new key and retires the old one, as an issuer rotating its signing key does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


@dataclass
class SigningKey:
    """A private key, its key id and algorithm."""

    kid: str
    algorithm: str
    private: Any

    def public_jwk(self) -> dict[str, Any]:
        codec = RSAAlgorithm if self.algorithm.startswith("RS") else ECAlgorithm
        jwk = json.loads(codec.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}


def rsa_key() -> SigningKey:
    return SigningKey(f"rsa-{uuid.uuid4().hex[:8]}", "RS256", rsa.generate_private_key(65537, 2048))


def ec_key() -> SigningKey:
    return SigningKey(f"ec-{uuid.uuid4().hex[:8]}", "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class Issuer:
    """Serves ``/.well-known/oauth-authorization-server`` and ``/jwks.json``; counts JWKS fetches."""

    keys: list[SigningKey] = field(default_factory=lambda: [rsa_key()])
    jwks_fetches: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: LoopbackHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return self._httpd.base_url

    def __enter__(self) -> Issuer:
        self._httpd = serve_in_thread(_handler(self), "oauth-issuer")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.close()

    def rotate(self, new: SigningKey) -> None:
        """Publish ``new`` in place of every earlier key."""
        with self._lock:
            self.keys = [new]

    def token(
        self,
        audience: str,
        scope: str = "baton:agent",
        *,
        key: SigningKey | None = None,
        issuer: str | None = None,
        expires_in: int = 600,
        not_before: int | None = None,
        without: tuple[str, ...] = (),
        kid: str | None = None,
        **claims: Any,
    ) -> str:
        """A signed access token (by the current key unless ``key`` says otherwise), minus the ``without``
        claims, with ``kid`` in its header when given (else the signer's)."""
        signer = key or self.keys[0]
        now = int(time.time())
        payload = {
            "iss": issuer or self.url,
            "aud": audience,
            "sub": "user-1",
            "client_id": "test-client",
            "scope": scope,
            "iat": now,
            "exp": now + expires_in,
            **({"nbf": not_before} if not_before is not None else {}),
            **claims,
        }
        for name in without:
            payload.pop(name, None)
        return jwt.encode(
            payload, signer.private, algorithm=signer.algorithm, headers={"kid": kid or signer.kid}
        )

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks.json",
            "token_endpoint": f"{self.url}/token",
            "authorization_endpoint": f"{self.url}/authorize",
            "response_types_supported": ["code"],
        }

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            self.jwks_fetches += 1
            return {"keys": [k.public_jwk() for k in self.keys]}


def _handler(issuer: Issuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            if self.path == "/.well-known/oauth-authorization-server":
                self._json(issuer.metadata())
            elif self.path == "/jwks.json":
                self._json(issuer.jwks())
            else:
                self._json({"error": "not_found"}, 404)

        def _json(self, body: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
