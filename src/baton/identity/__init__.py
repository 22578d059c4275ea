"""Who acts: agents and their credentials, people, passkeys, sessions, signed links, chat identities."""
