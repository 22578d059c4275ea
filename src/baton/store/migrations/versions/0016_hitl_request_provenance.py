"""hitl request provenance: who asked and what is at risk, written by the server (never by the asking agent)

``hitl_requests.provenance`` holds the MCP client's ``clientInfo.name``, the subagent and its parent when
a subagent's tool call asked, and for a gateway call approval the adapter, tool, the adapter's
``risk_class`` and the tool's pinned annotations. The inbox shows them to the person deciding.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hitl_requests") as batch:
        batch.add_column(sa.Column("provenance", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hitl_requests") as batch:
        batch.drop_column("provenance")
