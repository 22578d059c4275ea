"""Bringing a database to the current schema with Alembic, paying for Alembic only when needed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, inspect, text

#: The newest migration; a store already at it opens without importing Alembic.
HEAD_REVISION = "0024"


def current_revision(engine: Engine) -> str | None:
    """The store's Alembic revision, or None for a database that has never been migrated."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def alembic_config(connection: Any = None) -> Any:
    """An Alembic config pointing at baton's migrations (and at ``connection`` when given)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "baton.store:migrations")
    config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Apply every migration up to ``revision`` in one transaction; returns the new revision."""
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)
    return current_revision(engine)


def ensure_current(engine: Engine) -> None:
    """Upgrade the store if it is behind (the fast path is one small query)."""
    if current_revision(engine) != HEAD_REVISION:
        upgrade(engine)
