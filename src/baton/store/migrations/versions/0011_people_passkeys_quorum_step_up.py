"""people and passkeys; who decided, quorum and step-up on requests

``hitl_requests`` gains ``decided_by`` (a person's name, ``operator``, the OS user…),
``required_approvals`` (N distinct people), ``step_up`` (a fresh passkey assertion bound to the request)
and ``arguments_sha256`` (the digest a step-up assertion binds). ``hitl_approvals`` holds the partial
approvals of a quorum; ``people`` and ``people_passkeys`` the people who decide and their credentials.

Revision ID: 0011
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = (
    ("decided_by", sa.String(512)),
    ("required_approvals", sa.Integer()),
    ("step_up", sa.Boolean()),
    ("arguments_sha256", sa.String(64)),
)


def upgrade() -> None:
    """Add the request columns and the people, passkey and approval tables."""
    with op.batch_alter_table("hitl_requests") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    op.create_table(
        "hitl_approvals",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("person", sa.String(length=128), nullable=False),
        sa.Column("via", sa.String(length=32), nullable=False),
        sa.Column("approved_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("request_id", "person"),
    )
    op.create_table(
        "people",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("owns", sa.JSON(), nullable=True),
        sa.Column("enroll_nonce", sa.String(length=64), nullable=True),
        sa.Column("enroll_expires_epoch", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "people_passkeys",
        sa.Column("credential_id", sa.String(length=1400), nullable=False),
        sa.Column("person", sa.String(length=64), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("sign_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("last_used_at", sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint("credential_id"),
    )
    op.create_index("ix_people_passkeys_person", "people_passkeys", ["person"])


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("ix_people_passkeys_person", table_name="people_passkeys")
    op.drop_table("people_passkeys")
    op.drop_table("people")
    op.drop_table("hitl_approvals")
    with op.batch_alter_table("hitl_requests") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
