"""hitl notes of each decider: a quorum keeps every approver's notes

``hitl_approvals.admin_notes`` holds the notes each approver of a quorum wrote with their approval, and
``hitl_requests.notes`` the decided request's notes as a list of ``{by, notes}`` (every approver's, then
the decider's), so the agent and the receipt get all of them, not only the last decider's.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.add_column(sa.Column("admin_notes", sa.Text(), nullable=True))
    with op.batch_alter_table("hitl_requests") as batch:
        batch.add_column(sa.Column("notes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hitl_requests") as batch:
        batch.drop_column("notes")
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.drop_column("admin_notes")
