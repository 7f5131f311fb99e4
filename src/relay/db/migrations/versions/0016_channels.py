"""channels: WhatsApp and email beside SMS

A verification remembers the channels its latest send asked for (a resend
without them asks for the same); an attempt its channel and the channel of each
carrier of its route, so failover knows the next one's. A destination may be an
email address, at most 254 characters: the verification's `to_number` and the
abuse counter of wrong codes per destination widen to hold one. Every existing
row is SMS.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 12:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.alter_column(
            "to_number", existing_type=sa.String(16), type_=sa.String(254), existing_nullable=False
        )
        batch_op.add_column(
            sa.Column("channels", sa.String(40), nullable=False, server_default=sa.text("'sms'"))
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("channel", sa.String(16), nullable=False, server_default=sa.text("'sms'"))
        )
        batch_op.add_column(sa.Column("route_channels", sa.JSON(), nullable=True))
    with op.batch_alter_table("abuse_counters", schema=None) as batch_op:
        batch_op.alter_column(
            "subject", existing_type=sa.String(16), type_=sa.String(254), existing_nullable=False
        )


def downgrade() -> None:
    # Email verifications and their counters cannot be kept in the narrower columns.
    op.execute("DELETE FROM abuse_counters WHERE length(subject) > 16")
    op.execute(
        "DELETE FROM attempts WHERE verification_id IN"
        " (SELECT id FROM verifications WHERE length(to_number) > 16)"
    )
    op.execute("DELETE FROM verifications WHERE length(to_number) > 16")
    with op.batch_alter_table("abuse_counters", schema=None) as batch_op:
        batch_op.alter_column(
            "subject", existing_type=sa.String(254), type_=sa.String(16), existing_nullable=False
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("route_channels")
        batch_op.drop_column("channel")
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.drop_column("channels")
        batch_op.alter_column(
            "to_number", existing_type=sa.String(254), type_=sa.String(16), existing_nullable=False
        )
