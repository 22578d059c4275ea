"""named agents: the agents table, and the agent that owns each request, task, subagent and timer

Rows written before this revision belong to no agent (NULL): only the operator (the CLI, the admin
credential, an observer) sees them; every agent sees only the rows it created.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: Tables that gain an ``agent`` column, and whether it gets a one-column index.
OWNED = (("subagents", True), ("timers", True), ("hitl_requests", False), ("mcp_tasks", True))


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("revoked_at", sa.String(40), nullable=True),
    )
    for table, indexed in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("agent", sa.String(128), nullable=True))
        if indexed:
            op.create_index(f"ix_{table}_agent", table, ["agent"])
    op.create_index("ix_hitl_requests_agent_status", "hitl_requests", ["agent", "status"])


def downgrade() -> None:
    op.drop_index("ix_hitl_requests_agent_status", table_name="hitl_requests")
    for table, indexed in reversed(OWNED):
        if indexed:
            op.drop_index(f"ix_{table}_agent", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("agent")
    op.drop_table("agents")
