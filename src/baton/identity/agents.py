"""Named agents: who is calling, from a registered HTTP credential, the static token, OAuth or stdio.

``baton agents add NAME`` stores the sha256 of a fresh high-entropy token (printed once) and never the
token. Every request over HTTP is looked up here (no cache), so ``baton agents revoke NAME`` takes effect
on the running server's next request. The tool boundary learns its caller with :func:`current_agent`.

Roles: ``agent`` (the default) sees, waits on, cancels and reads only its own requests, tasks, subagents
and timers; ``observer`` also sees and reads every agent's (it still cancels only its own). The operator
(``BATON_ADMIN_TOKEN`` or the OAuth ``baton:admin`` scope) sees and acts on everything; it is never an
agent credential.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio

from baton.config import AGENT_NAME_PATTERN, RESERVED_AGENT_NAMES
from baton.errors import AgentError

if TYPE_CHECKING:
    from baton.config import Settings
    from baton.store.engine import Store
    from baton.store.prepared import Prepared

Role = Literal["agent", "observer", "operator"]
#: Roles ``baton agents add --role`` may grant (``operator`` belongs to the admin credential alone).
GRANTABLE_ROLES: tuple[str, ...] = ("agent", "observer")
#: The caller a loopback HTTP server admits without any credential (no token set, no agent registered).
LOCAL_AGENT = "local"
STDIO_FALLBACK = "stdio-agent"
#: Prefix of a stdio client's own claim (its ``clientInfo.name``); ``:`` is outside :data:`baton.config.AGENT_NAME_PATTERN`,
#: so a claim never equals a registered, reserved or ``BATON_AGENT_NAME`` agent.
STDIO_CLAIM_PREFIX = "stdio:"
_CLAIM_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: Key in the ASGI scope's ``state`` holding the request's :class:`Caller` (set by the HTTP middlewares).
AGENT_SCOPE_KEY = "baton_agent"
MAX_CLIENT_NAME = 128


@dataclass(frozen=True)
class Caller:
    """The agent behind one MCP request: its name and what it may see and act on."""

    name: str
    role: Role = "agent"

    @property
    def read_scope(self) -> str | None:
        """The agent whose rows this caller may see and read; None: every agent's."""
        return None if self.role in ("observer", "operator") else self.name

    @property
    def write_scope(self) -> str | None:
        """The agent whose rows this caller may cancel or change; None: every agent's."""
        return None if self.role == "operator" else self.name

    def owns(self, agent: str | None) -> bool:
        """Whether a row created by ``agent`` is this caller's own."""
        return agent is not None and hmac.compare_digest(agent.encode(), self.name.encode())


OPERATOR = Caller("operator", "operator")


def token_digest(token: str) -> str:
    """sha256 of a token (a high-entropy secret, so a plain digest is enough to store and look up)."""
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_token(header: bytes) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or None."""
    if header[:7].lower() != b"bearer ":
        return None
    token = header[7:].strip().decode("latin-1")
    return token or None


def check_name(name: str) -> str:
    """A valid new agent name, or ``agent_name_invalid``."""
    if not AGENT_NAME_PATTERN.fullmatch(name) or name.lower() in RESERVED_AGENT_NAMES:
        raise AgentError(
            "agent_name_invalid",
            "An agent name is 1 to 64 letters, digits, '.', '_' or '-', starts with a letter or digit, "
            f"and is none of {', '.join(sorted(RESERVED_AGENT_NAMES))}.",
            name=name[:80],
        )
    return name


class AgentDirectory:
    """The ``agents`` table: add, list, revoke, and the per-request token lookup."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, name: str, role: str = "agent") -> str:
        """Register ``name`` (or re-issue a revoked name) and return its token; only its hash is kept."""
        from sqlalchemy import insert, select, update

        from baton.evidence.canonical import iso
        from baton.store.schema import agents

        check_name(name)
        if role not in GRANTABLE_ROLES:
            raise AgentError(
                "agent_name_invalid", f"The role must be one of {', '.join(GRANTABLE_ROLES)}.", role=role
            )
        token = secrets.token_urlsafe(32)
        values = {"token_sha256": token_digest(token), "role": role, "created_at": iso(time.time())}
        with self.store.write() as connection:
            row = connection.execute(select(agents.c.revoked_at).where(agents.c.name == name)).first()
            if row is not None and row.revoked_at is None:
                raise AgentError(
                    "agent_exists", f"An agent named {name!r} exists; revoke it first.", name=name
                )
            if row is None:
                connection.execute(insert(agents).values(name=name, **values))
            else:
                connection.execute(
                    update(agents).where(agents.c.name == name).values(revoked_at=None, **values)
                )
        return token

    def list(self) -> list[dict[str, Any]]:
        """Every agent (revoked ones too), by name, without any credential."""
        from sqlalchemy import select

        from baton.store.schema import agents

        query = select(agents.c.name, agents.c.role, agents.c.created_at, agents.c.revoked_at)
        with self.store.read() as connection:
            rows = connection.execute(query.order_by(agents.c.name)).all()
        return [
            {
                "name": row.name,
                "role": row.role,
                "created_at": row.created_at,
                "revoked_at": row.revoked_at,
                "active": row.revoked_at is None,
            }
            for row in rows
        ]

    def revoke(self, name: str) -> None:
        """Revoke an active agent's token; its next request is refused (401)."""
        from sqlalchemy import update

        from baton.evidence.canonical import iso
        from baton.store.schema import agents

        with self.store.write() as connection:
            changed = connection.execute(
                update(agents)
                .where(agents.c.name == name, agents.c.revoked_at.is_(None))
                .values(revoked_at=iso(time.time()))
            ).rowcount
        if changed != 1:
            raise AgentError("agent_not_found", f"No active agent is named {name!r}.", name=name[:80])

    def lookup(self, token: str) -> Caller | None:
        """The active agent whose token this is, or None (unknown or revoked)."""
        digest = token_digest(token)
        by_digest, _ = _statements()
        if self.store.quick_reads:
            with self.store.quick_reader() as reader:
                row = by_digest.first(reader, digest=digest)
        else:
            with self.store.read() as connection:
                row = by_digest.first(connection, digest=digest)
        if row is None or not hmac.compare_digest(row[2], digest):
            return None
        return Caller(row[0], "observer" if row[1] == "observer" else "agent")

    def any_active(self) -> bool:
        """Whether any agent is registered and not revoked."""
        _, any_active = _statements()
        if self.store.quick_reads:
            with self.store.quick_reader() as reader:
                return any_active.first(reader) is not None
        with self.store.read() as connection:
            return any_active.first(connection) is not None

    async def lookup_now(self, token: str) -> Caller | None:
        """:meth:`lookup` for a request being served: inline on SQLite (one indexed read, see
        :meth:`baton.store.engine.Store.quick_reader`), in a worker thread on a database reached over the network."""
        if self.store.quick_reads:
            return self.lookup(token)
        return await anyio.to_thread.run_sync(self.lookup, token)

    async def any_active_now(self) -> bool:
        """:meth:`any_active` for a request being served (inline on SQLite, as :meth:`lookup_now`)."""
        if self.store.quick_reads:
            return self.any_active()
        return await anyio.to_thread.run_sync(self.any_active)


@functools.cache
def _statements() -> tuple[Prepared, Prepared]:
    """The per-request reads, built once (a statement built per call costs more than SQLite's own work):
    the active agent with a token digest, and whether any agent is active."""
    from sqlalchemy import bindparam, select

    from baton.store.prepared import Prepared
    from baton.store.schema import agents

    by_digest = select(agents.c.name, agents.c.role, agents.c.token_sha256).where(
        agents.c.token_sha256 == bindparam("digest"), agents.c.revoked_at.is_(None)
    )
    any_active = select(agents.c.name).where(agents.c.revoked_at.is_(None)).limit(1)
    return Prepared(by_digest), Prepared(any_active)


def client_name(ctx: Any) -> str | None:
    """The ``clientInfo.name`` the MCP client gave (initialize, or the 2026-07-28 request envelope)."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    name = getattr(getattr(params, "client_info", None), "name", None)
    if isinstance(name, str) and name.strip():
        return name.strip()[:MAX_CLIENT_NAME]
    return None


def stdio_claim(name: str | None) -> str:
    """The agent a stdio client without ``BATON_AGENT_NAME`` is: its name as a claim, never a real name."""
    if name is None:
        return STDIO_FALLBACK
    return STDIO_CLAIM_PREFIX + _CLAIM_UNSAFE.sub("_", name)[:64]


def refuse_registered_name(settings: Settings, directory: AgentDirectory) -> None:
    """``config_invalid`` when ``BATON_AGENT_NAME`` names an active registered agent: the stdio server
    would act as that HTTP agent (see its requests, wait on them) without its token."""
    from baton.errors import ConfigError

    name = settings.baton_agent_name
    if name is not None and any(row["active"] and row["name"] == name for row in directory.list()):
        raise ConfigError(
            "config_invalid",
            f"BATON_AGENT_NAME names the registered agent {name!r}; a stdio server needs a name of its own.",
            variables=["BATON_AGENT_NAME"],
        )


def current_agent(ctx: Any, settings: Settings) -> Caller:
    """The caller of one MCP request: what the HTTP middleware found, else the stdio server's one agent.

    Over HTTP the middleware always sets the caller for ``/mcp``; a request without one (which should not
    happen) is an anonymous caller that owns nothing anyone else created. Over stdio the agent is the
    operator's ``BATON_AGENT_NAME``; the client's ``clientInfo.name`` is only a claim (:func:`stdio_claim`).
    """
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    if isinstance(scope, dict):
        caller = scope.get("state", {}).get(AGENT_SCOPE_KEY)
        return caller if isinstance(caller, Caller) else Caller("anonymous")
    return Caller(settings.baton_agent_name or stdio_claim(client_name(ctx)))
