"""People who decide: named, each with passkeys registered through a one-time enrollment link.

``baton people add NAME`` creates the person and an enrollment link: signed with the inbox's
:class:`~baton.identity.links.LinkSigner`, expiring, and single use (its nonce is the person's one open
enrollment, cleared in the same transaction that stores the passkey). The store holds each passkey's
public key and sign count, never a secret. Removing a person removes their passkeys, and their inbox
sessions stop working at the next request.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from baton import clock
from baton.errors import PeopleError
from baton.evidence.canonical import iso
from baton.identity.links import LinkSigner, same
from baton.runtime import Runtime
from baton.store.schema import people, people_chat_identities, people_os_accounts, people_passkeys

#: A person's name: letters, digits, ``.``, ``_``, ``-``; it appears in receipts and on every page.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: Names that stand for a credential rather than a person (see docs/hitl.md, "Who decided").
RESERVED_NAMES = frozenset({"operator", "link-holder", "mcp-client", "nobody"})
#: How long an enrollment link stays valid by default (a day).
ENROLL_TTL_SECONDS = 24 * 3600
#: Where ``baton people add`` points the link when neither --url nor BATON_PUBLIC_URL says
#: (``localhost``, not ``127.0.0.1``: browsers refuse an IP address as a WebAuthn relying party).
DEFAULT_BASE_URL = "http://localhost:8765"


@dataclass(frozen=True)
class Person:
    """A person as listed: name, owned agents, passkeys, and whether an enrollment link is open."""

    name: str
    created_at: str
    owns: list[str]
    passkeys: int
    enrollment_open: bool
    #: Where a ``person:NAME`` escalation step reaches them, as a hint (``email a***@example.com``), or None.
    notify: str | None = None


@dataclass(frozen=True)
class StoredPasskey:
    """One registered credential: whose, its COSE public key and its last sign count."""

    credential_id: str
    person: str
    public_key: bytes
    sign_count: int


def check_name(name: str) -> str:
    """The name when it is one a person may have, else ``invalid_arguments``-like ``person_not_found``."""
    from baton.errors import ArgumentError

    if not NAME_PATTERN.match(name) or name.lower() in RESERVED_NAMES:
        raise ArgumentError(
            "invalid_arguments",
            "A person's name is 1-64 letters, digits, '.', '_' or '-' (starting with a letter or digit) and is "
            f"not one of {', '.join(sorted(RESERVED_NAMES))}.",
        )
    return name


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class People:
    """The people of one store: add, list, remove, enroll passkeys, look credentials up."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    # people ---------------------------------------------------------------------------------------

    def add(self, name: str, owns: list[str] | None = None) -> Person:
        """Create a person (``person_already_exists`` when the name is taken)."""
        check_name(name)
        owned = sorted(set(owns or []))
        now = iso(clock.time())
        try:
            with self.runtime.store.write() as connection:
                connection.execute(insert(people).values(name=name, created_at=now, owns=owned))
                self.runtime.receipts.append_in(
                    connection, "person_added", {"person": name, "owns": owned, "at": now}
                )
        except IntegrityError as exc:
            raise PeopleError(
                "person_already_exists", f"A person named {name!r} already exists.", person=name
            ) from exc
        return self.get(name)

    def get(self, name: str) -> Person:
        """One person (``person_not_found`` when there is none)."""
        found = [person for person in self.all() if person.name == name]
        if not found:
            raise PeopleError("person_not_found", f"No person is named {name!r}.", person=name)
        return found[0]

    def all(self) -> list[Person]:
        """Every person, by name, with the number of passkeys each has."""
        counts = (
            select(people_passkeys.c.person, func.count().label("n"))
            .group_by(people_passkeys.c.person)
            .subquery()
        )
        query = (
            select(people, counts.c.n)
            .select_from(people.outerjoin(counts, counts.c.person == people.c.name))
            .order_by(people.c.name)
        )
        now = clock.time()
        with self.runtime.store.read() as connection:
            rows = connection.execute(query).all()
        return [
            Person(
                name=row.name,
                created_at=row.created_at,
                owns=list(row.owns or []),
                passkeys=int(row.n or 0),
                enrollment_open=row.enroll_nonce is not None and (row.enroll_expires_epoch or 0) > now,
                notify=destination_hint(row.notify) if row.notify else None,
            )
            for row in rows
        ]

    def remove(self, name: str) -> None:
        """Remove a person, their passkeys, chat identities and OS account links (their sessions end)."""
        with self.runtime.store.write() as connection:
            gone = connection.execute(delete(people).where(people.c.name == name)).rowcount
            if gone != 1:
                raise PeopleError("person_not_found", f"No person is named {name!r}.", person=name)
            held = select(people_passkeys.c.credential_id).where(people_passkeys.c.person == name)
            revoked = sorted(_digest(_unb64(c)) for c in connection.execute(held).scalars().all())
            connection.execute(delete(people_passkeys).where(people_passkeys.c.person == name))
            connection.execute(delete(people_chat_identities).where(people_chat_identities.c.person == name))
            connection.execute(delete(people_os_accounts).where(people_os_accounts.c.person == name))
            self.runtime.receipts.append_in(
                connection,
                "person_removed",
                {"person": name, "credential_id_sha256s": revoked, "at": iso(clock.time())},
            )

    def set_notify(self, name: str, destination: str | None) -> None:
        """Set (or, with None, clear) where ``person:NAME`` escalation steps reach a person."""
        if destination is not None:
            parse_destination(destination)
        with self.runtime.store.write() as connection:
            done = connection.execute(
                update(people).where(people.c.name == name).values(notify=destination)
            ).rowcount
            if done != 1:
                raise PeopleError("person_not_found", f"No person is named {name!r}.", person=name)
            self.runtime.receipts.append_in(
                connection,
                "person_notify_set",
                {
                    "person": name,
                    "notify": destination_hint(destination) if destination else None,
                    "at": iso(clock.time()),
                },
            )

    def destination(self, name: str) -> tuple[str, str]:
        """``(channel, address)`` of a person's notify destination (``person_not_found``; a person with none:
        ``notification_not_configured``)."""
        from baton.errors import NotificationError

        with self.runtime.store.read() as connection:
            row = connection.execute(select(people.c.notify).where(people.c.name == name)).first()
        if row is None:
            raise PeopleError("person_not_found", f"No person is named {name!r}.", person=name)
        if not row.notify:
            raise NotificationError(
                "notification_not_configured",
                f"{name} has no notify destination; set one with `baton people notify {name} DEST`.",
                person=name,
            )
        return parse_destination(str(row.notify))

    def exists(self, name: str) -> bool:
        """Whether a person of that name is registered and has a passkey (so may log in)."""
        query = select(people_passkeys.c.person).where(people_passkeys.c.person == name).limit(1)
        with self.runtime.store.read() as connection:
            return connection.execute(query).first() is not None

    def added_epoch(self, name: str) -> float | None:
        """When the person of that name was added (epoch seconds), if they may log in: a session opened
        before then was a removed namesake's."""
        query = (
            select(people.c.created_at)
            .join(people_passkeys, people_passkeys.c.person == people.c.name)
            .where(people.c.name == name)
            .limit(1)
        )
        with self.runtime.store.read() as connection:
            row = connection.execute(query).first()
        return None if row is None else datetime.fromisoformat(str(row.created_at)).timestamp()

    def holds(self, name: str, passkey: str | None) -> bool:
        """Whether a session of ``name`` still stands: they have a passkey, and when the session names
        the one it was opened with (its :func:`passkey_digest`), that one is not revoked."""
        if passkey is None:
            return self.exists(name)
        return any(passkey_digest(_unb64(p.credential_id)) == passkey for p in self.passkeys_of(name))

    def anyone_can_log_in(self) -> bool:
        """Whether at least one person has a passkey."""
        with self.runtime.store.read() as connection:
            return connection.execute(select(people_passkeys.c.person).limit(1)).first() is not None

    def owners_of(self, agent: str) -> list[str]:
        """The people registered as owners of ``agent`` (``baton people add NAME --owns AGENT``)."""
        return [person.name for person in self.all() if agent in person.owns]

    # enrollment -----------------------------------------------------------------------------------

    def enrollment_link(self, name: str, base_url: str, ttl_seconds: int = ENROLL_TTL_SECONDS) -> str:
        """A new one-time enrollment link for ``name`` (any earlier open link stops working)."""
        nonce = secrets.token_urlsafe(16)
        expires = int(clock.time()) + ttl_seconds
        with self.runtime.store.write() as connection:
            done = connection.execute(
                update(people)
                .where(people.c.name == name)
                .values(enroll_nonce=nonce, enroll_expires_epoch=float(expires))
            ).rowcount
        if done != 1:
            raise PeopleError("person_not_found", f"No person is named {name!r}.", person=name)
        signer = LinkSigner.for_runtime(self.runtime)
        query = {
            "p": name,
            "e": str(expires),
            "n": nonce,
            "s": signer.sign("enroll", name, str(expires), nonce),
        }
        return f"{base_url.rstrip('/')}/inbox/enroll?{urlencode(query)}"

    def check_enrollment(self, params: dict[str, str]) -> tuple[str, str]:
        """``(person, nonce)`` of a valid, unexpired, unused enrollment link, else ``enrollment_link_invalid``."""
        name, expires, nonce, mac = (params.get(key, "") for key in ("p", "e", "n", "s"))
        signer = LinkSigner.for_runtime(self.runtime)
        if not (name and expires.isascii() and expires.isdigit() and nonce and mac) or len(nonce) > 64:
            raise _invalid_link("This enrollment link is malformed.")
        if not same(signer.sign("enroll", name, expires, nonce), mac):
            raise _invalid_link("This enrollment link's signature does not verify.")
        if int(expires) <= clock.time():
            raise _invalid_link("This enrollment link has expired; ask for a new one.")
        with self.runtime.store.read() as connection:
            row = connection.execute(select(people).where(people.c.name == name)).first()
        if row is None or row.enroll_nonce is None or not same(row.enroll_nonce, nonce):
            raise _invalid_link("This enrollment link was already used or replaced.")
        return name, nonce

    def register(
        self, name: str, nonce: str, credential_id: bytes, public_key: bytes, sign_count: int
    ) -> None:
        """Store a verified passkey and spend the enrollment link, in one transaction."""
        now = iso(clock.time())
        with self.runtime.store.write() as connection:
            spent = connection.execute(
                update(people)
                .where(people.c.name == name, people.c.enroll_nonce == nonce)
                .values(enroll_nonce=None, enroll_expires_epoch=None)
            ).rowcount
            if spent != 1:
                raise _invalid_link("This enrollment link was already used or replaced.")
            connection.execute(
                insert(people_passkeys).values(
                    credential_id=_b64(credential_id),
                    person=name,
                    public_key=_b64(public_key),
                    sign_count=sign_count,
                    created_at=now,
                )
            )
            self.runtime.receipts.append_in(
                connection,
                "passkey_registered",
                {
                    "person": name,
                    "credential_id_sha256": _digest(credential_id),
                    # the public half, once, in the chain: an auditor checks every later assertion with it
                    "public_key": _b64(public_key),
                    "at": now,
                },
            )

    # credentials ----------------------------------------------------------------------------------

    def passkeys_of(self, name: str) -> list[StoredPasskey]:
        """A person's passkeys."""
        query = select(people_passkeys).where(people_passkeys.c.person == name)
        with self.runtime.store.read() as connection:
            return [_stored(row) for row in connection.execute(query).all()]

    def passkey(self, credential_id: bytes) -> StoredPasskey | None:
        """The stored passkey with this credential id, if any."""
        query = select(people_passkeys).where(people_passkeys.c.credential_id == _b64(credential_id))
        with self.runtime.store.read() as connection:
            row = connection.execute(query).first()
        return _stored(row) if row is not None else None

    def used(self, connection: Connection, credential_id: bytes, sign_count: int) -> None:
        """Record an assertion's new sign count (inside the caller's transaction)."""
        connection.execute(
            update(people_passkeys)
            .where(people_passkeys.c.credential_id == _b64(credential_id))
            .values(sign_count=sign_count, last_used_at=iso(clock.time()))
        )


#: The channels a person's notify destination may use, each with what follows its ``CHANNEL:``. No
#: webhook: its URL is a bearer capability, and the store would hold it at rest (docs/hitl.md).
DESTINATION_PATTERNS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"^[^@\s,]{1,64}@[^@\s,]{1,255}$"),
    "telegram": re.compile(r"^(-?[0-9]{1,20}|@[A-Za-z0-9_]{5,32})$"),
}


def parse_destination(text: str) -> tuple[str, str]:
    """``email:ADDRESS`` or ``telegram:CHAT_ID`` as ``(channel, address)``; anything else is
    ``invalid_arguments``."""
    from baton.errors import ArgumentError

    channel, _, address = text.partition(":")
    pattern = DESTINATION_PATTERNS.get(channel)
    if pattern is None or not pattern.match(address):
        raise ArgumentError(
            "invalid_arguments",
            "A notify destination is email:ADDRESS or telegram:CHAT_ID (e.g. email:ada@example.com).",
        )
    return channel, address


def destination_hint(text: str) -> str:
    """A destination as lists and receipts may show it: the channel and a hint, never the address."""
    from baton.evidence.redaction import chat_hint, email_hint

    channel, _, address = text.partition(":")
    hint = {"email": email_hint, "telegram": chat_hint}.get(channel)
    return f"{channel} {hint(address)}" if hint else channel


def _stored(row: Any) -> StoredPasskey:
    return StoredPasskey(row.credential_id, row.person, _unb64(row.public_key), int(row.sign_count))


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def passkey_digest(credential_id: bytes) -> str:
    """A passkey's short digest, which a session opened with it carries."""
    return _digest(credential_id)[:16]


def _invalid_link(message: str) -> PeopleError:
    return PeopleError("enrollment_link_invalid", message)


def credential_id_bytes(text: str) -> bytes:
    """A base64url credential id as bytes (``passkey_invalid`` when it is not base64url)."""
    try:
        return _unb64(text)
    except ValueError as exc:
        raise PeopleError("passkey_invalid", "The credential id is not base64url.") from exc
