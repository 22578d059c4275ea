"""an index for one agent's pending list in its order

An agent's ``mcp_list_pending_requests`` lists only its own requests, urgent first, soonest to expire,
then by id. Without this index SQLite read every pending row of every agent and sorted them (196 ms a page
with 100,000 pending); with it the page is an index range read.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_hitl_requests_agent_pending_order",
        "hitl_requests",
        ["agent", "status", sa.text("urgent DESC"), "expires_epoch", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_hitl_requests_agent_pending_order", table_name="hitl_requests")
