"""One person's passkeys, listed and revoked one at a time (``baton people passkeys | revoke-passkey``).

A lost passkey is revoked alone: the person keeps their other passkeys and the sessions opened with them.
The revoked one no longer logs in or makes a step-up (its row is gone), and every session opened with it
ends at its next request, since a passkey session names its passkey's digest
(:meth:`baton.identity.people.People.holds`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from sqlalchemy import delete, select

from baton.errors import ArgumentError, PeopleError
from baton.evidence.canonical import iso
from baton.identity.people import People, credential_id_bytes
from baton.runtime import Runtime
from baton.store.schema import people_passkeys


@dataclass(frozen=True)
class ListedPasskey:
    """A passkey as listed: its credential id (base64url, public), when it was registered and last used."""

    credential_id: str
    created_at: str
    last_used_at: str | None


def listed_passkeys(runtime: Runtime, name: str) -> list[ListedPasskey]:
    """A person's passkeys, oldest first (``person_not_found``)."""
    People(runtime).get(name)
    query = (
        select(people_passkeys)
        .where(people_passkeys.c.person == name)
        .order_by(people_passkeys.c.created_at, people_passkeys.c.credential_id)
    )
    with runtime.store.read() as connection:
        rows = connection.execute(query).all()
    return [ListedPasskey(row.credential_id, row.created_at, row.last_used_at) for row in rows]


def revoke_passkey(runtime: Runtime, name: str, prefix: str) -> str:
    """Revoke the one passkey of ``name`` whose credential id starts with ``prefix`` (with its
    ``passkey_revoked`` receipt); returns its full credential id."""
    matching = [
        p.credential_id
        for p in listed_passkeys(runtime, name)
        if prefix and p.credential_id.startswith(prefix)
    ]
    if not matching:
        raise PeopleError(
            "passkey_not_found", f"{name} has no passkey whose id starts with {prefix!r}.", person=name
        )
    if len(matching) > 1:
        raise ArgumentError(
            "invalid_arguments",
            f"{len(matching)} passkeys of {name} start with {prefix!r}; give more of the id.",
        )
    digest = hashlib.sha256(credential_id_bytes(matching[0])).hexdigest()
    with runtime.store.write() as connection:
        connection.execute(
            delete(people_passkeys).where(
                people_passkeys.c.credential_id == matching[0], people_passkeys.c.person == name
            )
        )
        runtime.receipts.append_in(
            connection,
            "passkey_revoked",
            {"person": name, "credential_id_sha256": digest, "at": iso(time.time())},
        )
    return matching[0]
