"""Migrations: they build exactly the schema the code declares, on both databases."""

from __future__ import annotations

import subprocess
import sys

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from baton.schema import metadata
from baton.schema_migrations import HEAD_REVISION, current_revision
from baton.store import Store


def test_migrations_build_the_declared_schema(database_url: str) -> None:
    store = Store(database_url)
    try:
        assert current_revision(store.engine) == HEAD_REVISION
        with store.engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        store.dispose()
    assert differences == [], (
        "schema.py changed without a migration: add one in src/baton/migrations/versions"
    )


def test_head_revision_names_the_newest_migration() -> None:
    from alembic.script import ScriptDirectory

    from baton.schema_migrations import alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_db_upgrade_command_reports_the_revision(baton_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "baton", "db", "upgrade"],
        env=baton_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"revision {HEAD_REVISION}" in done.stdout
