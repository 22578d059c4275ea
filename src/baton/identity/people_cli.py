"""``baton people``: add, list, remove, enroll, passkeys, revoke-passkey, link-chat, link-os, over :mod:`baton.identity.people`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from baton.errors import BatonError
from baton.terminal import fail as _fail
from baton.terminal import out, print_table
from baton.terminal import print_json as _print_json

app = typer.Typer(
    help="People who decide: passkey enrollment links, chat identities, notify destinations, list, remove.",
    no_args_is_help=True,
)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The inbox's base URL; default BATON_PUBLIC_URL, else where `baton serve --http` on this home "
        "listens (at localhost), else http://localhost:8765.",
    ),
]
NotifyOption = Annotated[
    str | None,
    typer.Option(
        "--notify",
        help="Where person:NAME escalation steps reach them: email:ADDRESS or telegram:CHAT_ID.",
    ),
]
TtlOption = Annotated[
    int, typer.Option("--expires-in", min=60, help="Seconds the enrollment link stays valid.")
]


def _people() -> Any:
    from baton.identity.people import People
    from baton.runtime import Runtime

    return People(Runtime.open())


def _link(people: Any, name: str, url: str | None, ttl: int) -> None:
    from baton.identity.people import DEFAULT_BASE_URL
    from baton.identity.public_url import public_url

    base = url or public_url(people.runtime.settings) or DEFAULT_BASE_URL
    link = people.enrollment_link(name, base, ttl)
    out.print(f"Enrollment link for {name} (works once, for {ttl} s; send it to {name} only):")
    out.print(link, soft_wrap=True, markup=False, highlight=False)


@app.command("add")
def add(
    name: str,
    owns: Annotated[
        list[str] | None, typer.Option("--owns", help="An agent this person owns (repeatable).")
    ] = None,
    url: UrlOption = None,
    ttl: TtlOption = 24 * 3600,
    notify: NotifyOption = None,
) -> None:
    """Create a person and print their one-time passkey enrollment link."""
    try:
        people = _people()
        if notify is not None:
            from baton.identity.people import parse_destination

            parse_destination(notify)  # refused before the person exists
        people.add(name, owns or [])
        if notify is not None:
            people.set_notify(name, notify)
        _link(people, name, url, ttl)
    except BatonError as exc:
        _fail(exc)


@app.command("enroll")
def enroll(name: str, url: UrlOption = None, ttl: TtlOption = 24 * 3600) -> None:
    """Print a new enrollment link for an existing person (another passkey; an open link stops working)."""
    try:
        people = _people()
        people.get(name)
        _link(people, name, url, ttl)
    except BatonError as exc:
        _fail(exc)


@app.command("notify")
def notify_destination(
    name: str,
    destination: Annotated[str | None, typer.Argument(help="email:ADDRESS or telegram:CHAT_ID.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the person's destination.")] = False,
) -> None:
    """Set where person:NAME escalation steps reach a person (or --clear it)."""
    from baton.errors import ArgumentError

    try:
        if (destination is None) == (not clear):
            raise ArgumentError("invalid_arguments", "Give a destination, or --clear (not both).")
        people = _people()
        people.set_notify(name, None if clear else destination)
        shown = people.get(name).notify
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"{name}: {shown or 'no notify destination'}.")


@app.command("list")
def list_people(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List people, their passkeys and the agents they own."""
    import dataclasses

    from baton.identity.chat_identities import ChatIdentities
    from baton.identity.os_accounts import OsAccounts

    people = _people()
    rows = people.all()
    chats: dict[str, list[str]] = {}
    for linked in ChatIdentities(people.runtime).all():
        chats.setdefault(linked.person, []).append(str(linked.identity))
    accounts: dict[str, list[str]] = {}
    for account in OsAccounts(people.runtime).all():
        accounts.setdefault(account.person, []).append(account.account.user)
    if as_json:
        _print_json(
            [
                {**dataclasses.asdict(p), "chat": chats.get(p.name, []), "os": accounts.get(p.name, [])}
                for p in rows
            ]
        )
        return
    if not rows:
        out.print("Nobody yet: `baton people add NAME`.")
        return
    print_table(
        ("name", "passkeys", "enrollment", "owns", "chat", "os", "notify", "since"),
        [
            (
                p.name,
                str(p.passkeys),
                "open" if p.enrollment_open else "",
                ", ".join(p.owns),
                ", ".join(chats.get(p.name, [])),
                ", ".join(accounts.get(p.name, [])),
                p.notify or "",
                p.created_at,
            )
            for p in rows
        ],
    )


@app.command("link-chat")
def link_chat(
    name: str,
    identity: Annotated[str, typer.Argument(help="slack:USER_ID (U…/W…) or telegram:NUMERIC_USER_ID.")],
) -> None:
    """Let a Slack or Telegram account decide as this person (its button presses name them)."""
    from baton.identity.chat_identities import ChatIdentities, parse_identity

    try:
        people = _people()
        linked = ChatIdentities(people.runtime).link(name, parse_identity(identity))
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"Linked {linked.identity} to {linked.person}.", markup=False, highlight=False)


@app.command("unlink-chat")
def unlink_chat(
    identity: Annotated[str, typer.Argument(help="slack:USER_ID or telegram:NUMERIC_USER_ID.")],
) -> None:
    """Stop a Slack or Telegram account deciding as anyone."""
    from baton.identity.chat_identities import ChatIdentities, parse_identity

    try:
        parsed = parse_identity(identity)
        person = ChatIdentities(_people().runtime).unlink(parsed)
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"Unlinked {parsed} from {person}.", markup=False, highlight=False)


@app.command("link-os")
def link_os(
    name: str, user: Annotated[str, typer.Argument(help="An OS account on this machine (its uid is stored).")]
) -> None:
    """Let an OS account's CLI decisions (`baton hitl approve` run by its uid) count as this person."""
    from baton.identity.os_accounts import OsAccounts

    try:
        linked = OsAccounts(_people().runtime).link(name, user)
    except BatonError as exc:
        _fail(exc)
        return
    account = linked.account
    out.print(
        f"Linked the OS account {account.user} (uid {account.uid}) to {linked.person}.",
        markup=False,
        highlight=False,
    )


@app.command("unlink-os")
def unlink_os(user: Annotated[str, typer.Argument(help="The OS account to unlink.")]) -> None:
    """Stop an OS account's CLI decisions counting as a person (they count as the account's own name)."""
    from baton.identity.os_accounts import OsAccounts

    try:
        person = OsAccounts(_people().runtime).unlink(user)
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"Unlinked the OS account {user} from {person}.", markup=False, highlight=False)


@app.command("remove")
def remove(name: str) -> None:
    """Remove a person, their passkeys, chat identities and OS account links; their inbox sessions end."""
    try:
        _people().remove(name)
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"Removed {name}.")


@app.command("passkeys")
def passkeys(name: str, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List one person's passkeys: credential id, when registered, when last used."""
    import dataclasses

    try:
        from baton.identity.passkey_admin import listed_passkeys

        rows = listed_passkeys(_people().runtime, name)
    except BatonError as exc:
        _fail(exc)
        return
    if as_json:
        _print_json([dataclasses.asdict(p) for p in rows])
        return
    if not rows:
        out.print(f"{name} has no passkey: `baton people enroll {name}`.")
        return
    print_table(
        ("credential id", "registered", "last used"),
        [(p.credential_id, p.created_at, p.last_used_at or "never") for p in rows],
    )


@app.command("revoke-passkey")
def revoke_passkey(
    name: str,
    credential: Annotated[
        str, typer.Argument(help="The credential id, or its start (see `baton people passkeys`).")
    ],
) -> None:
    """Revoke one passkey (a lost one): it no longer logs in or decides, and its sessions end."""
    try:
        from baton.identity.passkey_admin import revoke_passkey

        revoked = revoke_passkey(_people().runtime, name, credential)
    except BatonError as exc:
        _fail(exc)
        return
    out.print(f"Revoked {name}'s passkey {revoked[:16]}….", markup=False, highlight=False)
