"""hitl approval assertions: each quorum approval keeps its WebAuthn assertion

``hitl_approvals.assertion`` holds the passkey assertion an approver of a quorum signed over the request's
action hash (``None`` for an approval made another way), so the decision's receipt can carry all N.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.add_column(sa.Column("assertion", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.drop_column("assertion")
