"""callback_nonces: nonces of verified carrier callbacks, kept for the carrier's window

Plivo signs no time into its callbacks: the nonce it signs is what stops a
replay, so each one is taken once per carrier, in one INSERT on a unique key,
and pruned once its window has passed.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "callback_nonces",
        sa.Column("carrier", sa.String(length=60), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("carrier", "nonce"),
    )
    with op.batch_alter_table("callback_nonces", schema=None) as batch_op:
        batch_op.create_index("ix_callback_nonces_expires", ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("callback_nonces", schema=None) as batch_op:
        batch_op.drop_index("ix_callback_nonces_expires")
    op.drop_table("callback_nonces")
