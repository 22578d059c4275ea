"""cost: daily model spend and each subagent's cost and budget

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create model_spend; add cost and budget columns to subagents."""
    op.create_table(
        "model_spend",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("day"),
    )
    with op.batch_alter_table("subagents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("unpriced_calls", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("max_total_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("max_cost_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop the cost and budget columns and model_spend."""
    with op.batch_alter_table("subagents", schema=None) as batch_op:
        batch_op.drop_column("max_cost_usd")
        batch_op.drop_column("max_total_tokens")
        batch_op.drop_column("unpriced_calls")
        batch_op.drop_column("cost_usd")
    op.drop_table("model_spend")
