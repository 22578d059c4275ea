"""Migrations: they build exactly the schema the code declares, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from baton.store.engine import Store
from baton.store.migrate import HEAD_REVISION, current_revision
from baton.store.schema import metadata
from tests.cli_process import run_cli


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
EXPRESSION_INDEXES = {"ix_hitl_requests_pending_order", "ix_hitl_requests_agent_pending_order"}


def _comparable(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    return not (type_ == "index" and name in EXPRESSION_INDEXES)


def test_head_revision_names_the_newest_migration() -> None:
    from alembic.script import ScriptDirectory

    from baton.store.migrate import alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_db_upgrade_command_reports_the_revision(baton_env: dict[str, str]) -> None:
    done = run_cli(baton_env, "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert f"revision {HEAD_REVISION}" in done.stdout


def test_adapters_live_before_the_serving_snapshot_stay_live_after_0009(database_url: str) -> None:
    """A promoted and a run-time blocked adapter keep serving; a stage-blocked one is not made live."""
    from sqlalchemy import create_engine, text

    from baton.gateway.policy.state import is_live
    from baton.store.migrate import upgrade

    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS gateway_adapters"))
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
        upgrade(engine, "0008")
        rows = [
            ("served", "promoted", None, None),
            ("drifted", "blocked", "runtime: the upstream drifted", "mcp_tool_contract_mismatch"),
            ("refused", "blocked", "replay: no contract", "adapter_contract_unpinned"),
        ]
        with engine.begin() as connection:
            for adapter_id, state, reason, error_class in rows:
                connection.execute(
                    text(
                        "INSERT INTO gateway_adapters (id, state, policy_path, policy_checksum, "
                        "replay_receipt_sha256, block_reason, error_class, updated_at) VALUES "
                        "(:id, :state, '/p.toml', :checksum, 'r', :reason, :error_class, 'now')"
                    ),
                    {
                        "id": adapter_id,
                        "state": state,
                        "checksum": f"sha256:{adapter_id}",
                        "reason": reason,
                        "error_class": error_class,
                    },
                )
        upgrade(engine)
        with engine.connect() as connection:
            found = {
                row["id"]: dict(row)
                for row in connection.execute(text("SELECT * FROM gateway_adapters")).mappings()
            }
    finally:
        engine.dispose()
    assert {name for name, row in found.items() if is_live(row)} == {"served", "drifted"}
    assert found["served"]["serving_policy_checksum"] == "sha256:served"
    assert found["drifted"]["serving_block_reason"] == "runtime: the upstream drifted"
    assert found["served"]["serving_block_reason"] is None


def test_receipts_keep_their_chain_across_0018_both_ways(database_url: str) -> None:
    """0018 drops the digest's unique index (a rebuild on SQLite): every receipt stays, the chain still
    verifies and the next append links onto it; downgrading puts the index back."""
    from alembic import command

    from baton.evidence.receipts import ReceiptLog
    from baton.evidence.redaction import Redactor
    from baton.store.migrate import alembic_config, upgrade

    def digest_unique(connection: object) -> bool:
        inspector = inspect(connection)
        named = [c["column_names"] for c in inspector.get_unique_constraints("receipts")]
        indexed = [i["column_names"] for i in inspector.get_indexes("receipts") if i["unique"]]
        return ["sha256"] in named + indexed

    store = Store(database_url)
    try:
        log = ReceiptLog(store, Redactor(()))
        appended = [log.append("tool_call", {"tool": "mcp_ping", "n": n}) for n in range(5)]
        with store.engine.connect() as connection:
            assert not digest_unique(connection)
        with store.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0017")
        with store.engine.connect() as connection:
            assert digest_unique(connection)
        assert upgrade(store.engine) == HEAD_REVISION
        with store.engine.connect() as connection:
            assert not digest_unique(connection)
        report = log.verify()
        assert report.ok, report
        assert report.count == 5 and report.head_sha256 == appended[-1].sha256
        following = log.append("tool_call", {"tool": "mcp_ping", "n": 5})
        assert following.prev_sha256 == appended[-1].sha256
        assert log.verify().ok
    finally:
        store.dispose()
