"""erased_receipts: the carrier message ids of erased attempts, hashed, for a while

An erasure deletes attempts that may still get a carrier's receipt. Such a
receipt matches no attempt; without this table it would be parked in
`early_reports` as one that overtook its submit. Its carrier and the SHA-256 of
its message id are kept until `expires_at`, so the receipt is dropped instead
(relay.delivery.erased_receipts).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from relay.db.utc_datetime import UtcDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erased_receipts",
        sa.Column("carrier", sa.String(length=60), nullable=False),
        sa.Column("message_hash", sa.String(length=64), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("carrier", "message_hash"),
    )
    op.create_index("ix_erased_receipts_expires", "erased_receipts", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_erased_receipts_expires", table_name="erased_receipts")
    op.drop_table("erased_receipts")
