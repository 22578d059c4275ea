"""hitl: inbox sessions revoked by logout

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the hitl_session_revocations table."""
    op.create_table(
        "hitl_session_revocations",
        sa.Column("sid", sa.String(length=64), nullable=False),
        sa.Column("expires_epoch", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("sid"),
    )


def downgrade() -> None:
    """Drop the hitl_session_revocations table."""
    op.drop_table("hitl_session_revocations")
