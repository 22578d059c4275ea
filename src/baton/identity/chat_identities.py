"""Chat identities: ``slack:U…`` or ``telegram:123…`` linked to exactly one person.

A button press in Slack or Telegram names the chat user who pressed it; that user decides only as the
person the operator linked (``baton people link-chat NAME slack:U123``). An unlinked user decides nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError

from baton.errors import PeopleError
from baton.evidence.canonical import iso
from baton.identity.people import People
from baton.runtime import Runtime
from baton.store.schema import people_chat_identities

PLATFORMS = ("slack", "telegram")
#: Slack user ids (U… in a workspace, W… on Enterprise Grid); Telegram user ids are positive integers.
USER_ID_PATTERNS = {
    "slack": re.compile(r"^[UW][A-Z0-9]{2,30}$"),
    "telegram": re.compile(r"^[1-9][0-9]{0,19}$"),
}


@dataclass(frozen=True)
class ChatIdentity:
    """One chat account: the platform and the user id it gives every callback."""

    platform: str
    user_id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.user_id}"


@dataclass(frozen=True)
class LinkedIdentity:
    """A chat account as listed: the account, its person and when it was linked."""

    identity: ChatIdentity
    person: str
    linked_at: str


def parse_identity(text: str) -> ChatIdentity:
    """``slack:U123`` / ``telegram:42`` as a :class:`ChatIdentity` (``chat_identity_invalid`` otherwise)."""
    platform, _, user_id = text.strip().partition(":")
    pattern = USER_ID_PATTERNS.get(platform.lower())
    if pattern is None or not pattern.match(user_id):
        raise PeopleError(
            "chat_identity_invalid",
            "A chat identity is slack:USER_ID (U… or W…, as Slack shows it in a member's profile) or "
            "telegram:USER_ID (the numeric id of the Telegram user).",
        )
    return ChatIdentity(platform.lower(), user_id)


class ChatIdentities:
    """The chat identities of one store: link, unlink, list and look up."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def link(self, person: str, identity: ChatIdentity) -> LinkedIdentity:
        """Link ``identity`` to ``person`` (``person_not_found``; ``chat_identity_taken`` when linked)."""
        People(self.runtime).get(person)
        now = iso(time.time())
        try:
            with self.runtime.store.write() as connection:
                connection.execute(
                    insert(people_chat_identities).values(
                        platform=identity.platform, user_id=identity.user_id, person=person, linked_at=now
                    )
                )
                self.runtime.receipts.append_in(
                    connection,
                    "chat_identity_linked",
                    {"person": person, "platform": identity.platform, "user_id": identity.user_id, "at": now},
                )
        except IntegrityError as exc:
            owner = self.person_for(identity)
            raise PeopleError(
                "chat_identity_taken",
                f"{identity} is already linked to {owner}; `baton people unlink-chat {identity}` first.",
                identity=str(identity),
            ) from exc
        return LinkedIdentity(identity, person, now)

    def unlink(self, identity: ChatIdentity) -> str:
        """Unlink ``identity``; returns the person it was linked to (``chat_identity_not_found``)."""
        person = self.person_for(identity)
        with self.runtime.store.write() as connection:
            gone = connection.execute(
                delete(people_chat_identities).where(
                    people_chat_identities.c.platform == identity.platform,
                    people_chat_identities.c.user_id == identity.user_id,
                )
            ).rowcount
            if gone != 1 or person is None:
                raise PeopleError(
                    "chat_identity_not_found", f"No person is linked to {identity}.", identity=str(identity)
                )
            self.runtime.receipts.append_in(
                connection,
                "chat_identity_unlinked",
                {
                    "person": person,
                    "platform": identity.platform,
                    "user_id": identity.user_id,
                    "at": iso(time.time()),
                },
            )
        return person

    def person_for(self, identity: ChatIdentity) -> str | None:
        """The person ``identity`` is linked to, or None."""
        query = select(people_chat_identities.c.person).where(
            people_chat_identities.c.platform == identity.platform,
            people_chat_identities.c.user_id == identity.user_id,
        )
        with self.runtime.store.read() as connection:
            return connection.execute(query).scalar()

    def all(self) -> list[LinkedIdentity]:
        """Every linked identity, by person, then platform and user id."""
        table = people_chat_identities.c
        query = select(people_chat_identities).order_by(table.person, table.platform, table.user_id)
        with self.runtime.store.read() as connection:
            rows = connection.execute(query).all()
        return [LinkedIdentity(ChatIdentity(r.platform, r.user_id), r.person, r.linked_at) for r in rows]

    def of(self, person: str) -> list[str]:
        """A person's identities as ``platform:user_id`` strings."""
        return [str(linked.identity) for linked in self.all() if linked.person == person]
