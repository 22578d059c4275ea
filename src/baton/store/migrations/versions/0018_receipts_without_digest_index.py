"""receipts: no unique index on the digest

A receipt's ``sha256`` covers the one before it and ``seq`` is the table's key, so two receipts can share a
digest only through a SHA-256 collision, and no query looks a receipt up by its digest (``baton receipts
verify`` recomputes every digest in seq order). The unique index still cost every append a B-tree insert
at a random page, since a digest is random: a quarter of a receipt append on SQLite (72 → 54 µs), and
about 60 bytes of every receipt in the store.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: The name SQLite's unnamed UNIQUE constraint gets when the batch operation reflects the table.
_NAMED = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        # SQLite drops a constraint only by rebuilding the table (rows copied in seq order, same transaction)
        with op.batch_alter_table("receipts", recreate="always", naming_convention=_NAMED) as batch:
            batch.drop_constraint("uq_receipts_sha256", type_="unique")
        return
    for constraint in sa.inspect(bind).get_unique_constraints("receipts"):
        if constraint["column_names"] == ["sha256"] and constraint["name"]:
            op.drop_constraint(constraint["name"], "receipts", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("receipts") as batch:
        batch.create_unique_constraint("uq_receipts_sha256", ["sha256"])
