"""people's OS accounts, and the uid behind each CLI approval

``people_os_accounts`` maps a real uid (``baton people link-os NAME USER``) to the person a CLI decision from
that account counts as; ``hitl_approvals.os_uid`` records the uid of a CLI approval, so one OS account
counts once in a quorum whatever ``LOGNAME`` says.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the OS account table and add the uid column."""
    op.create_table(
        "people_os_accounts",
        sa.Column("os_uid", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("os_user", sa.String(length=64), nullable=False),
        sa.Column("person", sa.String(length=64), nullable=False),
        sa.Column("linked_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("os_uid"),
    )
    op.create_index("ix_people_os_accounts_person", "people_os_accounts", ["person"])
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.add_column(sa.Column("os_uid", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("hitl_approvals") as batch:
        batch.drop_column("os_uid")
    op.drop_index("ix_people_os_accounts_person", table_name="people_os_accounts")
    op.drop_table("people_os_accounts")
