"""OAuth 2.1 resource server for ``baton serve --http`` (MCP authorization; RFC 9728, RFC 8707, RFC 8414).

When ``BATON_OAUTH_ISSUER`` and ``BATON_OAUTH_AUDIENCE`` are set, ``/mcp`` and ``/metrics`` accept the
issuer's JWT access tokens, and the inbox accepts one that carries ``baton:admin``:

- the signature is checked by PyJWT against the issuer's JWKS, found through the issuer's metadata
  (``/.well-known/oauth-authorization-server``, else ``openid-configuration``), cached, and fetched
  again when a token names a key id the cache does not hold (key rotation; rate-limited); only
  asymmetric algorithms are accepted;
- ``iss`` must be the issuer, ``aud`` must contain the audience (the RFC 8707 resource: this server's
  ``/mcp`` URL), ``exp`` is required, ``exp``/``nbf`` are checked with a small leeway;
- scopes (``scope`` or ``scp``): ``baton:agent`` may call the tools, ``baton:admin`` may also decide
  human-in-the-loop requests (the same mark ``BATON_ADMIN_TOKEN`` puts on a request).

The protected-resource metadata (RFC 9728) is served at ``/.well-known/oauth-protected-resource`` and at
the resource-path-suffixed URL, and every 401 names it in ``WWW-Authenticate``. The static bearer tokens
keep working next to OAuth when they are set.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from baton import clock
from baton.errors import ConfigError
from baton.http.addresses import is_loopback
from baton.http.asgi import ASGIApp
from baton.identity.agents import AGENT_SCOPE_KEY, AgentDirectory, Caller, bearer_token

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

    from baton.config import Settings
    from baton.runtime import Runtime

log = logging.getLogger("baton.http.oauth")

AGENT_SCOPE = "baton:agent"
ADMIN_SCOPE = "baton:admin"
SCOPES = [AGENT_SCOPE, ADMIN_SCOPE]
#: Asymmetric signatures only: an HMAC or ``none`` token could be forged with public material.
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
JWKS_TTL_SECONDS = 300.0
#: Refetches for unknown key ids: a burst of REFETCH_BURST, then one per REFETCH_SECONDS (a flood of
#: made-up kids must not turn into a flood of JWKS requests to the issuer).
REFETCH_BURST = 5.0
REFETCH_SECONDS = 10.0
LEEWAY_SECONDS = 30
#: Paths that need a token with a baton scope.
GUARDED = ("/mcp", "/metrics")


#: Prefix of an OAuth caller's agent name, so that it never equals a registered agent's (no ':' there).
OAUTH_AGENT_PREFIX = "oauth:"
MAX_AGENT_CHARS = 128


def oauth_caller(access: AccessToken) -> Caller:
    """The agent an access token names: ``oauth:CLIENT/SUBJECT``, so two users of one client app are two
    agents (``oauth:CLIENT`` when the token has no other subject); ``baton:admin`` makes it the operator."""
    client = access.client_id or access.subject or "unknown"
    subject = access.subject if access.subject and access.subject != client else None
    name = f"{OAUTH_AGENT_PREFIX}{client}" + (f"/{subject}" if subject else "")
    if len(name) > MAX_AGENT_CHARS:  # cut, two long names could meet: a digest keeps them apart
        import hashlib

        digest = hashlib.sha256(f"{client}\n{subject or ''}".encode()).hexdigest()[:32]
        name = f"{name[: MAX_AGENT_CHARS - 33]}~{digest}"
    return Caller(name, "operator" if ADMIN_SCOPE in access.scopes else "agent")


def enabled(settings: Settings) -> bool:
    """Whether the OAuth resource server is configured."""
    return bool(settings.baton_oauth_issuer)


def check_settings(settings: Settings) -> tuple[str, str]:
    """The issuer and audience, or ``config_invalid`` saying what is wrong."""
    issuer, audience = settings.baton_oauth_issuer, settings.baton_oauth_audience
    if not issuer or not audience:
        raise ConfigError(
            "config_invalid", "BATON_OAUTH_ISSUER needs BATON_OAUTH_AUDIENCE (this server's /mcp URL)."
        )
    for name, url in (("BATON_OAUTH_ISSUER", issuer), ("BATON_OAUTH_AUDIENCE", audience)):
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ConfigError("config_invalid", f"{name} must be an absolute https URL.")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ConfigError("config_invalid", f"{name} must use https (plain http only on loopback).")
    return issuer, audience


def metadata_candidates(issuer: str) -> list[str]:
    """Where the issuer's metadata may be (RFC 8414 path insertion, then OpenID Connect's two forms)."""
    parts = urlsplit(issuer)
    base, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}{path}/.well-known/openid-configuration",
        f"{base}/.well-known/openid-configuration{path}",
    ]


class JwtVerifier:
    """The SDK's ``TokenVerifier``: a JWT access token to an ``AccessToken``, or None when it fails a check."""

    def __init__(self, issuer: str, audience: str, jwks_ttl_seconds: float = JWKS_TTL_SECONDS) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_ttl_seconds = jwks_ttl_seconds
        self._jwks_uri: str | None = None
        self._keys: dict[str, Any] = {}
        self._fetched_at = float("-inf")  # never fetched: stale on any clock, even a just-booted one
        self._refetch_tokens = REFETCH_BURST
        self._refilled_at = clock.monotonic()

    async def verify_token(self, token: str) -> AccessToken | None:
        """Check signature, issuer, audience, expiry and not-before; None (and a log line) on any failure."""
        import jwt
        from mcp.server.auth.provider import AccessToken

        try:
            header = jwt.get_unverified_header(token)
            algorithm = header.get("alg")
            if algorithm not in ALGORITHMS:
                raise jwt.InvalidAlgorithmError(f"algorithm {algorithm!r} is not accepted")
            try:
                key = await self._key(header.get("kid"))
            except LookupError:
                raise
            except Exception as exc:  # the issuer unreachable or answering garbage: no key, no entry
                raise LookupError(f"the issuer's keys could not be fetched: {type(exc).__name__}") from None
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, LookupError, ValueError) as exc:
            log.info("access token refused: %s", type(exc).__name__)
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or claims.get("sub") or "unknown"),
            scopes=token_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=claims.get("sub"),
            claims={"iss": claims.get("iss")},
        )

    async def _key(self, kid: str | None) -> Any:
        """The signing key named ``kid``: from the cache, or after fetching the JWKS (rotation)."""
        now = clock.monotonic()
        stale = now - self._fetched_at > self.jwks_ttl_seconds
        unknown = kid not in self._keys if kid else not self._keys
        if stale or (unknown and self._may_refetch(now)):
            try:
                await self._fetch_keys()
            except Exception as exc:  # the issuer down: keys already held stay good until it is back
                if unknown:
                    raise
                log.warning("JWKS refresh failed (%s); using the cached keys", type(exc).__name__)
        if kid is None:
            if len(self._keys) != 1:
                raise LookupError("a token without kid needs a JWKS of exactly one key")
            return next(iter(self._keys.values()))
        return self._keys[kid]

    def _may_refetch(self, now: float) -> bool:
        """Spend one refetch from the bucket (refilled at one per REFETCH_SECONDS), if any is left."""
        refill = (now - self._refilled_at) / REFETCH_SECONDS
        self._refetch_tokens = min(REFETCH_BURST, self._refetch_tokens + refill)
        self._refilled_at = now
        if self._refetch_tokens < 1:
            return False
        self._refetch_tokens -= 1
        return True

    async def _fetch_keys(self) -> None:
        import httpx
        from jwt import PyJWKSet

        async with httpx.AsyncClient(timeout=5.0, follow_redirects=False) as http:
            if self._jwks_uri is None:
                self._jwks_uri = await self._discover(http)
            response = await http.get(self._jwks_uri)
            response.raise_for_status()
        jwks = PyJWKSet.from_dict(response.json())
        self._keys = {jwk.key_id: jwk.key for jwk in jwks.keys if jwk.key_id}
        if not self._keys and len(jwks.keys) == 1:
            self._keys = {"": jwks.keys[0].key}
        self._fetched_at = clock.monotonic()

    async def _discover(self, http: Any) -> str:
        """The issuer's ``jwks_uri``, from metadata whose ``issuer`` is exactly the configured one."""
        import httpx

        for url in metadata_candidates(self.issuer):
            try:
                response = await http.get(url)
            except httpx.HTTPError as exc:  # try the next form
                log.debug("issuer metadata at %s unreachable: %s", url, type(exc).__name__)
                continue
            if response.status_code != 200:
                continue
            metadata = response.json()
            if metadata.get("issuer") != self.issuer or not metadata.get("jwks_uri"):
                raise LookupError("the issuer's metadata names another issuer or no jwks_uri")
            return str(metadata["jwks_uri"])
        raise LookupError("the issuer publishes no authorization-server metadata")


def token_scopes(claims: dict[str, Any]) -> list[str]:
    """Scopes from ``scope`` (space-separated) or ``scp`` (a list or a string)."""
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, list):
        return [str(s) for s in raw]
    return str(raw).split()


def resource_metadata_url(audience: str) -> str:
    """The RFC 9728 metadata URL of the resource (``/.well-known/oauth-protected-resource`` + its path)."""
    from mcp.server.auth.routes import build_resource_metadata_url
    from pydantic import AnyHttpUrl

    return str(build_resource_metadata_url(AnyHttpUrl(audience)))


def routes(runtime: Runtime) -> list[Any]:
    """The protected-resource metadata routes (none when OAuth is off): the RFC 9728 URL of the resource
    and the bare well-known path, both answered by the SDK's metadata handler."""
    if not enabled(runtime.settings):
        return []
    from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
    from mcp.server.auth.routes import cors_middleware
    from mcp.shared.auth import ProtectedResourceMetadata
    from starlette.routing import Route

    issuer, audience = check_settings(runtime.settings)
    # validated from strings: the model keeps an empty path empty (an issuer is compared exactly)
    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": audience,
            "authorization_servers": [issuer],
            "scopes_supported": SCOPES,
            "resource_name": "baton",
        }
    )
    handler = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    paths = dict.fromkeys(
        [
            urlsplit(resource_metadata_url(audience)).path,
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
        ]
    )
    return [Route(path, endpoint=handler, methods=["GET", "OPTIONS"]) for path in paths]


class OAuthMiddleware:
    """Admits a request to ``/mcp`` or ``/metrics`` with a valid access token carrying a baton scope.

    A request presenting one of the static tokens goes on to ``static`` (the bearer-token middleware),
    unchanged. Any other bearer is checked as a JWT; ``baton:admin`` marks the request as the admin
    token does (``ADMIN_SCOPE_KEY``) on every path, so the inbox (and the console) can honour it; their own
    logins and signed links still apply.
    """

    def __init__(
        self, app: ASGIApp, static: ASGIApp, settings: Settings, directory: AgentDirectory | None = None
    ) -> None:
        issuer, audience = check_settings(settings)
        self.app = app
        self.static = static
        self.directory = directory
        self.static_tokens = [t for t in (settings.baton_http_token, settings.baton_admin_token) if t]
        self.verifier = JwtVerifier(issuer, audience)
        self.metadata_url = resource_metadata_url(audience)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """Authenticate, authorize by scope, mark admins; 401/403 carry the resource metadata URL."""
        from baton.identity.callers import ADMIN_SCOPE_KEY

        if scope["type"] != "http":
            await self.static(scope, receive, send)
            return
        path = scope["path"]
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        if any(hmac.compare_digest(header, f"Bearer {t}".encode()) for t in self.static_tokens):
            await self.static(scope, receive, send)
            return
        if await self._registered_agent(header):  # a registered agent's token: the static guard names it
            await self.static(scope, receive, send)
            return
        guarded = path.startswith(GUARDED)
        if not guarded and not header:  # the metadata, and the inbox's or console's own login and links
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state.pop(ADMIN_SCOPE_KEY, None)
        state.pop(AGENT_SCOPE_KEY, None)
        bearer = header[7:].decode("latin-1") if header[:7].lower() == b"bearer " else ""
        access = await self.verifier.verify_token(bearer) if bearer else None
        if access is not None:
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from starlette.authentication import AuthCredentials

            # as the SDK's own auth middleware does: the session manager binds each MCP session to the
            # principal (client, issuer, subject) that opened it
            scope["user"], scope["auth"] = AuthenticatedUser(access), AuthCredentials(access.scopes)
            if ADMIN_SCOPE in access.scopes:
                state[ADMIN_SCOPE_KEY] = True
            state[AGENT_SCOPE_KEY] = oauth_caller(access)
        if guarded and access is None:
            await self._refuse(
                send, 401, "invalid_token", "http_unauthorized", "A valid access token is required."
            )
            return
        if guarded and access is not None and not set(SCOPES) & set(access.scopes):
            await self._refuse(
                send,
                403,
                "insufficient_scope",
                "http_insufficient_scope",
                f"The access token lacks the {AGENT_SCOPE} (or {ADMIN_SCOPE}) scope.",
            )
            return
        await self.app(scope, receive, send)

    async def _registered_agent(self, header: bytes) -> bool:
        """Whether the bearer is an active registered agent's token (a JWT never is)."""
        token = bearer_token(header)
        if token is None or self.directory is None or token.count(".") == 2:
            return False
        return await self.directory.lookup_now(token) is not None

    async def _refuse(self, send: Any, status: int, error: str, error_class: str, message: str) -> None:
        challenge = f'Bearer error="{error}", resource_metadata="{self.metadata_url}"'
        if status == 403:
            challenge += f', scope="{AGENT_SCOPE}"'
        body = json.dumps({"success": False, "error": message, "error_class": error_class}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
