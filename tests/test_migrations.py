"""Migrations: they build exactly the schema the code declares, on both databases."""

from __future__ import annotations

import subprocess
import sys

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from baton.schema import metadata
from baton.schema_migrations import HEAD_REVISION, current_revision
from baton.store import Store


def test_migrations_build_the_declared_schema(database_url: str) -> None:
    store = Store(database_url)
    try:
        assert current_revision(store.engine) == HEAD_REVISION
        with store.engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_object": _comparable})
            differences = compare_metadata(context, metadata)
            indexes = {index["name"] for index in inspect(connection).get_indexes("hitl_requests")}
    finally:
        store.dispose()
    assert differences == [], (
        "schema.py changed without a migration: add one in src/baton/migrations/versions"
    )
    assert indexes >= EXPRESSION_INDEXES


#: Indexes with an expression (``urgent DESC``) that Alembic cannot compare; checked by name instead.
EXPRESSION_INDEXES = {"ix_hitl_requests_pending_order"}


def _comparable(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    return not (type_ == "index" and name in EXPRESSION_INDEXES)


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
