"""The person behind a CLI decision: the OS account of the process's real uid, counted once.

``LOGNAME`` and ``USER`` are whatever the shell says (``getpass.getuser()`` reads them first), so one shell
could approve as ``p1``, ``p2`` and ``p3``, or under an enrolled person's name. A CLI decision is therefore
made by the real uid: its name is the password database's (``pwd.getpwuid(os.getuid())``), the uid is
recorded with a quorum approval (one uid counts once), and it counts as an enrolled person only when the
operator mapped the uid to them (``baton people link-os NAME USER``). An unmapped account whose name equals
an enrolled person's is refused (``hitl_decider_not_authorized``): it could be anybody's shell.
"""

from __future__ import annotations

import os
import pwd
import time
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.exc import IntegrityError

from baton.errors import HitlError, PeopleError
from baton.evidence.canonical import iso
from baton.identity.people import People
from baton.runtime import Runtime
from baton.store.schema import people, people_os_accounts


@dataclass(frozen=True)
class OsAccount:
    """An OS account: its real uid and its name in the password database."""

    uid: int
    user: str


@dataclass(frozen=True)
class LinkedAccount:
    """An OS account as listed: the account, its person and when it was linked."""

    account: OsAccount
    person: str
    linked_at: str


def current_account() -> OsAccount:
    """This process's OS account, from its real uid (never from the environment)."""
    uid = os.getuid()
    try:
        return OsAccount(uid, pwd.getpwuid(uid).pw_name)
    except KeyError:  # a uid with no passwd entry (a container's arbitrary uid) still counts once
        return OsAccount(uid, f"uid-{uid}")


def account_named(user: str) -> OsAccount:
    """The OS account called ``user`` on this machine (``os_account_not_found`` when there is none)."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError as exc:
        raise PeopleError(
            "os_account_not_found", f"This machine has no OS account named {user!r}.", os_user=user
        ) from exc
    return OsAccount(entry.pw_uid, entry.pw_name)


def cli_decider(connection: Connection, uid: int) -> str:
    """The name a CLI decision by ``uid`` is made under: its linked person, else its own account name,
    which may not be an enrolled person's (``hitl_decider_not_authorized``)."""
    query = select(people_os_accounts.c.person).where(people_os_accounts.c.os_uid == uid)
    linked = connection.execute(query).scalar()
    if linked is not None:
        return str(linked)
    name = _account_name(uid)
    if connection.execute(select(people.c.name).where(people.c.name == name)).first() is not None:
        raise HitlError(
            "hitl_decider_not_authorized",
            f"The OS account {name} (uid {uid}) has an enrolled person's name but is not linked to them; "
            f"the operator links it with `baton people link-os {name} {name}`, or {name} decides in the inbox.",
            os_uid=uid,
        )
    return name


def _account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid-{uid}"


class OsAccounts:
    """The OS account links of one store: link, unlink, list."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def link(self, person: str, user: str) -> LinkedAccount:
        """Let ``user``'s uid decide on the CLI as ``person`` (``person_not_found``, ``os_account_not_found``,
        ``os_account_taken``); receipted."""
        People(self.runtime).get(person)
        account = account_named(user)
        now = iso(time.time())
        try:
            with self.runtime.store.write() as connection:
                connection.execute(
                    insert(people_os_accounts).values(
                        os_uid=account.uid, os_user=account.user, person=person, linked_at=now
                    )
                )
                self.runtime.receipts.append_in(
                    connection,
                    "os_account_linked",
                    {"person": person, "os_user": account.user, "os_uid": account.uid, "at": now},
                )
        except IntegrityError as exc:
            raise PeopleError(
                "os_account_taken",
                f"The OS account {account.user} is already linked to {self.person_for(account.uid)}; "
                f"`baton people unlink-os {account.user}` first.",
                os_user=account.user,
            ) from exc
        return LinkedAccount(account, person, now)

    def unlink(self, user: str) -> str:
        """Stop ``user``'s uid deciding as its person; returns that person (``os_account_not_found``)."""
        account = account_named(user)
        with self.runtime.store.write() as connection:
            person = connection.execute(
                select(people_os_accounts.c.person).where(people_os_accounts.c.os_uid == account.uid)
            ).scalar()
            if person is None:
                raise PeopleError(
                    "os_account_not_found", f"No person is linked to the OS account {user}.", os_user=user
                )
            connection.execute(delete(people_os_accounts).where(people_os_accounts.c.os_uid == account.uid))
            self.runtime.receipts.append_in(
                connection,
                "os_account_unlinked",
                {"person": person, "os_user": account.user, "os_uid": account.uid, "at": iso(time.time())},
            )
        return str(person)

    def person_for(self, uid: int) -> str | None:
        """The person ``uid`` is linked to, or None."""
        query = select(people_os_accounts.c.person).where(people_os_accounts.c.os_uid == uid)
        with self.runtime.store.read() as connection:
            found = connection.execute(query).scalar()
        return None if found is None else str(found)

    def all(self) -> list[LinkedAccount]:
        """Every linked account, by person, then account name."""
        table = people_os_accounts.c
        query = select(people_os_accounts).order_by(table.person, table.os_user)
        with self.runtime.store.read() as connection:
            rows = connection.execute(query).all()
        return [LinkedAccount(OsAccount(r.os_uid, r.os_user), r.person, r.linked_at) for r in rows]
