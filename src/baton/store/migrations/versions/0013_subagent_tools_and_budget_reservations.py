"""governed subagents: a spawn's tool allow-list and tool limit, the request it waits on; budget reservations

``subagents.tools`` keeps the names a spawn may call (``mcp_send_message_to_subagent`` keeps them),
``tool_limit`` its ``subagent_tool_limit``, ``waiting_request_id`` the human request a tool call of it waits
on. ``model_spend.reserved_*`` hold what model calls in flight have reserved of the day's budget.

Revision ID: 0013
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subagents") as batch:
        batch.add_column(sa.Column("tools", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("tool_limit", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("waiting_request_id", sa.String(40), nullable=True))
    with op.batch_alter_table("model_spend") as batch:
        batch.add_column(sa.Column("reserved_tokens", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("reserved_usd", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("model_spend") as batch:
        batch.drop_column("reserved_usd")
        batch.drop_column("reserved_tokens")
    with op.batch_alter_table("subagents") as batch:
        batch.drop_column("waiting_request_id")
        batch.drop_column("tool_limit")
        batch.drop_column("tools")
