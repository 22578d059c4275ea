"""subagent delegation: the chain of authority each subagent holds

``subagents.delegation`` holds the subagent's delegation chain (agent -> subagent -> ..., each link the
tools, adapters, read_only, argument predicates, budgets and deadline in force, hashed) and the Cedar text
of each argument predicate by sha256: its turns enforce it and its receipts carry it.
``delegated_tokens`` and ``delegated_cost_usd`` add up what its own subagents (at any depth) spent, so its
budget covers what it delegated too.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subagents") as batch:
        batch.add_column(sa.Column("delegation", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("delegated_tokens", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("delegated_cost_usd", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("subagents") as batch:
        batch.drop_column("delegated_cost_usd")
        batch.drop_column("delegated_tokens")
        batch.drop_column("delegation")
