"""webhook deliveries

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 00:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_PENDING = "delivery_status = 'pending'"


def upgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("attempt_count", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
        batch_op.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=40)))
        batch_op.create_index(
            "ix_events_due",
            ["next_attempt_at"],
            unique=False,
            sqlite_where=sa.text(_PENDING),
            postgresql_where=sa.text(_PENDING),
        )
    # Events written before this migration are due at once, not lost.
    op.execute("UPDATE events SET next_attempt_at = created_at WHERE delivery_status = 'pending'")

    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=40), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=32), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["event_id"], ["events.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.create_index("uq_webhook_attempts_number", ["event_id", "number"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.drop_index("uq_webhook_attempts_number")
    op.drop_table("webhook_attempts")

    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_events_due", sqlite_where=sa.text(_PENDING), postgresql_where=sa.text(_PENDING)
        )
        batch_op.drop_column("lease_owner")
        batch_op.drop_column("lease_until")
        batch_op.drop_column("next_attempt_at")
        batch_op.drop_column("attempt_count")
