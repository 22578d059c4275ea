"""hitl grants: standing approvals a person gave (docs/hitl.md, "Standing grants")

``hitl_grants`` holds each grant: which agent may call which adapter's tool, under which Cedar condition,
how many times and until when, who granted it from which request, and when (and by whom) it was revoked.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hitl_grants",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("adapter_id", sa.String(128), nullable=False),
        sa.Column("tool", sa.String(256), nullable=False),
        sa.Column("condition", sa.Text(), nullable=True),
        sa.Column("policy", sa.Text(), nullable=False),
        sa.Column("policy_sha256", sa.String(64), nullable=False),
        sa.Column("max_uses", sa.Integer(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("expires_at", sa.String(40), nullable=False),
        sa.Column("expires_epoch", sa.Float(), nullable=False),
        sa.Column("granted_by", sa.String(512), nullable=False),
        sa.Column("granted_via", sa.String(32), nullable=False),
        sa.Column("request_id", sa.String(40), nullable=False),
        sa.Column("step_up", sa.Boolean(), nullable=False),
        sa.Column("revoked_at", sa.String(40), nullable=True),
        sa.Column("revoked_by", sa.String(512), nullable=True),
    )
    op.create_index("ix_hitl_grants_lookup", "hitl_grants", ["agent", "adapter_id", "tool"])


def downgrade() -> None:
    op.drop_index("ix_hitl_grants_lookup", table_name="hitl_grants")
    op.drop_table("hitl_grants")
