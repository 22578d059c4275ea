"""Alembic environment: runs on the connection baton hands it (see ``baton.store.migrate``)."""

from __future__ import annotations

from alembic import context

from baton.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True, compare_type=True)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        from sqlalchemy import text

        connection.execute(text("SELECT pg_advisory_xact_lock(7321001)"))  # one migrator at a time
    context.run_migrations()
