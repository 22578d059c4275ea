"""gateway adapters: the serving snapshot, apart from the candidate's stage

A promoted adapter serves the policy and bundle snapshot it was promoted with (``serving_*``) while a
re-lock, verify and replay of its next version move ``state``; a run-time block belongs to the snapshot.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

COLUMNS = (
    ("serving_policy_checksum", sa.String(80)),
    ("serving_replay_receipt_sha256", sa.String(64)),
    ("serving_contract", sa.JSON()),
    ("serving_block_reason", sa.Text()),
    ("serving_error_class", sa.String(64)),
    ("serving_since", sa.String(40)),
)


def upgrade() -> None:
    with op.batch_alter_table("gateway_adapters") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    # adapters live before this revision serve what their row says (from the working files, see promotion)
    op.execute(
        "UPDATE gateway_adapters SET serving_policy_checksum = policy_checksum, "
        "serving_replay_receipt_sha256 = replay_receipt_sha256, serving_contract = contract, "
        "serving_since = updated_at WHERE state = 'promoted' "
        "OR (state = 'blocked' AND block_reason LIKE 'runtime:%')"
    )
    op.execute(
        "UPDATE gateway_adapters SET serving_block_reason = block_reason, serving_error_class = error_class "
        "WHERE state = 'blocked' AND block_reason LIKE 'runtime:%'"
    )


def downgrade() -> None:
    with op.batch_alter_table("gateway_adapters") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
