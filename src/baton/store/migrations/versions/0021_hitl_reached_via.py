"""hitl reached via: the paths that told someone a request waits

``hitl_requests.reached_via`` is the list of paths a request went out on (``url_elicitation``,
``tasks``, ``progress``, ``notification``, ``chat``, ``terminal``, ``console``, ...), so the record
says, as the asking call's result does, who could have learned of it.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hitl_requests") as batch:
        batch.add_column(sa.Column("reached_via", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hitl_requests") as batch:
        batch.drop_column("reached_via")
