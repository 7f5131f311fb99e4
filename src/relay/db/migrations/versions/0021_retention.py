"""retention: an account's own delete_after, and the figures of deleted rows

Verifications and messages are deleted once past their account's
`delete_after` (NULL: the `delete_after` setting). Before a batch is deleted,
what the figures read of it (the console's charts, measured routing) is added
to `retained_figures`, grouped by minute and without a destination, so those
figures read the same after a prune (relay.retention).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from relay.db.utc_datetime import UtcDateTime

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("delete_after", sa.Integer(), nullable=True))
    op.create_table(
        "retained_figures",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("minute", UtcDateTime(), nullable=False),
        sa.Column("final_minute", UtcDateTime(), nullable=True),
        sa.Column("country", sa.String(length=2), nullable=True),
        sa.Column("carrier", sa.String(length=60), nullable=True),
        sa.Column("status", sa.String(length=24), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("of_verification", sa.Boolean(), nullable=True),
        sa.Column("failover", sa.Boolean(), nullable=True),
        sa.Column("approved", sa.Boolean(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_retained_figures_minute", "retained_figures", ["kind", "minute"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_retained_figures_minute", table_name="retained_figures")
    op.drop_table("retained_figures")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("delete_after")
