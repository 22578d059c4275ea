"""gateway: adapter state

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the gateway_adapters table."""
    op.create_table(
        "gateway_adapters",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("policy_path", sa.Text(), nullable=False),
        sa.Column("policy_checksum", sa.String(length=80), nullable=True),
        sa.Column("artifact_set_sha256", sa.String(length=64), nullable=True),
        sa.Column("lock_receipt_sha256", sa.String(length=64), nullable=True),
        sa.Column("verify_receipt_sha256", sa.String(length=64), nullable=True),
        sa.Column("replay_receipt_sha256", sa.String(length=64), nullable=True),
        sa.Column("contract", sa.JSON(), nullable=True),
        sa.Column("block_reason", sa.Text(), nullable=True),
        sa.Column("error_class", sa.String(length=64), nullable=True),
        sa.Column("updated_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("gateway_adapters", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gateway_adapters_state"), ["state"], unique=False)


def downgrade() -> None:
    """Drop the gateway_adapters table."""
    with op.batch_alter_table("gateway_adapters", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gateway_adapters_state"))
    op.drop_table("gateway_adapters")
