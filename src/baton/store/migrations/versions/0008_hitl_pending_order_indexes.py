"""indexes for the paginated pending list and the expiry sweep

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_hitl_requests_pending_order",
        "hitl_requests",
        ["status", sa.text("urgent DESC"), "expires_epoch", "id"],
    )
    op.create_index("ix_hitl_requests_status_expiry", "hitl_requests", ["status", "expires_epoch"])


def downgrade() -> None:
    op.drop_index("ix_hitl_requests_status_expiry", table_name="hitl_requests")
    op.drop_index("ix_hitl_requests_pending_order", table_name="hitl_requests")
