"""Elicitation in the 2026-07-28 era: the multi-round-trip pattern (MRTR) for approval and input requests.

In that era a server has no back-channel for ``elicitation/create``. Instead the tool call answers with an
``InputRequiredResult`` carrying the elicitation and an opaque ``requestState``; the client asks its user and
retries the same call with ``inputResponses`` and the echoed state.

The state names only the request (its id and a one-time nonce). It is sealed by the SDK's
:class:`~mcp.server.request_state.RequestStateBoundary` (AES-256-GCM, bound to the tool name, the arguments'
digest and the audience ``baton``, with a TTL) under a key derived from the same secret the inbox links use
(``BATON_HTTP_TOKEN`` or ``BATON_HOME/hitl_link_secret``), so every replica sharing the store and the home or
the token accepts a retry. The nonce is spent in the store on the first retry: a replayed state is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.errors import HitlError

if TYPE_CHECKING:  # the store's modules load lazily: build_server runs before the handshake
    from baton.config import Settings
    from baton.hitl.records import Decision
    from baton.runtime import Runtime

#: The key of baton's one elicitation in ``inputRequests`` / ``inputResponses``.
INPUT_KEY = "baton_decision"
#: How long a sealed state is accepted after it was minted (a person may take a while in the client).
STATE_TTL_SECONDS = 86_400.0
_KEY_LABEL = b"baton-mrtr-request-state-v1"
_NONCE_PREFIX = "mrtr:"

__all__ = ["INPUT_KEY", "MrtrState", "boundary", "consume_state", "decision_from_answer", "new_state"]


def modern_era(protocol_version: str | None) -> bool:
    """Whether the call came over a 2026-07-28 (or later) connection, where only MRTR can elicit."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return protocol_version in MODERN_PROTOCOL_VERSIONS


def state_key(settings: Settings) -> bytes:
    """The requestState key: derived from the inbox-link secret, so replicas sharing it agree."""
    from baton.identity.links import load_secret

    Path(settings.home).mkdir(parents=True, exist_ok=True, mode=0o700)
    return hmac.new(load_secret(settings), _KEY_LABEL, hashlib.sha256).digest()


class _LazyCodec:
    """The SDK's AES-GCM codec under :func:`state_key`, built on first use (the settings load lazily)."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self._codec: Any = None

    def _inner(self) -> Any:
        if self._codec is None:
            from mcp.server.request_state import AESGCMRequestStateCodec

            self._codec = AESGCMRequestStateCodec([state_key(self._settings())])
        return self._codec

    def seal(self, payload: bytes) -> str:
        """Encrypt and authenticate ``payload``."""
        token: str = self._inner().seal(payload)
        return token

    def unseal(self, token: str) -> bytes:
        """Verify and decrypt ``token`` (raises the SDK's InvalidRequestState)."""
        payload: bytes = self._inner().unseal(token)
        return payload


def boundary(settings: Callable[[], Settings]) -> Any:
    """The server middleware that seals outgoing and verifies incoming ``requestState``."""
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    security = RequestStateSecurity(codec=_LazyCodec(settings), ttl=STATE_TTL_SECONDS)
    return RequestStateBoundary(security, default_audience="baton")


@dataclass(frozen=True)
class MrtrState:
    """What a round carries between the legs: the request, a one-time nonce and the elicitation's mode."""

    request_id: str
    nonce: str
    mode: str

    def encode(self) -> str:
        """Plaintext for the boundary to seal."""
        return json.dumps({"r": self.request_id, "n": self.nonce, "m": self.mode}, separators=(",", ":"))


def new_state(request_id: str, mode: str) -> MrtrState:
    """A fresh state for one elicitation round."""
    return MrtrState(request_id, secrets.token_hex(16), mode)


def consume_state(runtime: Runtime, plaintext: str) -> MrtrState:
    """Parse a verified state and spend its nonce in the store; a second use is refused."""
    from sqlalchemy import insert
    from sqlalchemy.exc import IntegrityError

    from baton.evidence.canonical import iso
    from baton.store.schema import hitl_link_uses

    try:
        raw = json.loads(plaintext)
        state = MrtrState(str(raw["r"]), str(raw["n"]), str(raw["m"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise _invalid("malformed") from exc
    try:
        with runtime.store.write() as connection:
            connection.execute(
                insert(hitl_link_uses).values(
                    nonce=_NONCE_PREFIX + state.nonce, request_id=state.request_id, used_at=iso(time.time())
                )
            )
    except IntegrityError as exc:
        raise _invalid("used") from exc
    return state


def _invalid(reason: str) -> HitlError:
    return HitlError(
        "mcp_request_state_invalid",
        "This requestState was already used or is malformed; call the tool again without it.",
        reason=reason,
    )


def decision_from_answer(view: dict[str, Any], action: str, content: Any) -> Decision | None:
    """The answer a form elicitation carries, or None: only an accepted, well-formed form answers, and only
    an input request; an approval is never decided by the agent's own client, whatever it sends."""
    from baton.hitl.records import Decision

    if view["kind"] != "input" or action != "accept" or not isinstance(content, dict):
        return None
    response = content.get("response")
    if not isinstance(response, str):
        return None
    if view["options"] and response not in view["options"]:
        return None
    return Decision(response=response, via="elicitation")
