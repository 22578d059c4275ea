"""people's chat identities: a Slack or Telegram user id mapped to the person who decides from chat

``people_chat_identities`` holds ``(platform, user_id) -> person``; a button press in Slack or Telegram
decides under that person's name (``baton people link-chat NAME slack:U…``).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the chat identity table."""
    op.create_table(
        "people_chat_identities",
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("person", sa.String(length=64), nullable=False),
        sa.Column("linked_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id"),
    )
    op.create_index("ix_people_chat_identities_person", "people_chat_identities", ["person"])


def downgrade() -> None:
    """Drop it again."""
    op.drop_index("ix_people_chat_identities_person", table_name="people_chat_identities")
    op.drop_table("people_chat_identities")
