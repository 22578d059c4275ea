"""hitl escalation: a timer may belong to a request (its escalation steps); a person may have a notify destination

``timers.request_id`` names the human-in-the-loop request a step timer escalates (NULL for the timers
agents set); a decision, an expiry or a withdrawal cancels the request's step timers in its own
transaction. ``people.notify`` is where a ``person:NAME`` step reaches that person (``email:ADDRESS`` or
``telegram:CHAT_ID``).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("timers") as batch:
        batch.add_column(sa.Column("request_id", sa.String(40), nullable=True))
        batch.create_index("ix_timers_request_id", ["request_id"])
    with op.batch_alter_table("people") as batch:
        batch.add_column(sa.Column("notify", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("people") as batch:
        batch.drop_column("notify")
    with op.batch_alter_table("timers") as batch:
        batch.drop_index("ix_timers_request_id")
        batch.drop_column("request_id")
