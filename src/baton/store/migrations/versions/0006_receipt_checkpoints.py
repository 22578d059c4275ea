"""receipts: signed checkpoints of the chain head

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the receipt_checkpoints table."""
    op.create_table(
        "receipt_checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("at", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("signature", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("receipt_checkpoints", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_receipt_checkpoints_seq"), ["seq"], unique=False)


def downgrade() -> None:
    """Drop the receipt_checkpoints table."""
    with op.batch_alter_table("receipt_checkpoints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_receipt_checkpoints_seq"))
    op.drop_table("receipt_checkpoints")
