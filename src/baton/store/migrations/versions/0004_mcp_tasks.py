"""mcp tasks: the io.modelcontextprotocol/tasks extension's durable task state

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the mcp_tasks table."""
    op.create_table(
        "mcp_tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("input_requests", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("last_updated_at", sa.String(length=40), nullable=False),
        sa.Column("expires_epoch", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("mcp_tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_mcp_tasks_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_mcp_tasks_request_id"), ["request_id"], unique=False)


def downgrade() -> None:
    """Drop the mcp_tasks table."""
    with op.batch_alter_table("mcp_tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_mcp_tasks_request_id"))
        batch_op.drop_index(batch_op.f("ix_mcp_tasks_status"))
    op.drop_table("mcp_tasks")
