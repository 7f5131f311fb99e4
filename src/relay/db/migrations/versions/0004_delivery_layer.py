"""delivery layer: messages, routed attempts, early receipts, usage

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "messages",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("to_number", sa.String(length=16), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("sender", sa.String(length=60), nullable=False),
        sa.Column("locale", sa.String(length=35), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("sealed_code", sa.LargeBinary(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("webhook_url", sa.String(length=2048), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index("ix_messages_list", ["account_id", "livemode", "id"], unique=False)

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.alter_column("verification_id", existing_type=sa.String(length=40), nullable=True)
        batch_op.add_column(sa.Column("message_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("route", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("position", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("report_due_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key("fk_attempts_message", "messages", ["message_id"], ["id"])
        batch_op.create_index("ix_attempts_message", ["message_id", "id"], unique=False)
        batch_op.create_index(
            "ix_attempts_carrier_message", ["carrier", "carrier_message_id"], unique=False
        )
        batch_op.create_index(
            "ix_attempts_queued",
            ["lease_until"],
            unique=False,
            sqlite_where=sa.text("status = 'queued'"),
            postgresql_where=sa.text("status = 'queued'"),
        )
        batch_op.create_index(
            "ix_attempts_report_due",
            ["report_due_at"],
            unique=False,
            sqlite_where=sa.text("status = 'sent'"),
            postgresql_where=sa.text("status = 'sent'"),
        )

    op.create_table(
        "early_reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("carrier", sa.String(length=60), nullable=False),
        sa.Column("carrier_message_id", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("early_reports", schema=None) as batch_op:
        batch_op.create_index(
            "ix_early_reports_message", ["carrier", "carrier_message_id"], unique=False
        )

    op.create_table(
        "usage",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("carrier", sa.String(length=60), nullable=False),
        sa.Column("outcome", sa.String(length=24), nullable=False),
        sa.Column("count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("account_id", "day", "country", "carrier", "outcome"),
    )


def downgrade() -> None:
    op.drop_table("usage")
    with op.batch_alter_table("early_reports", schema=None) as batch_op:
        batch_op.drop_index("ix_early_reports_message")
    op.drop_table("early_reports")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_report_due")
        batch_op.drop_index("ix_attempts_queued")
        batch_op.drop_index("ix_attempts_carrier_message")
        batch_op.drop_index("ix_attempts_message")
        batch_op.drop_constraint("fk_attempts_message", type_="foreignkey")
        batch_op.drop_column("report_due_at")
        batch_op.drop_column("lease_owner")
        batch_op.drop_column("lease_until")
        batch_op.drop_column("position")
        batch_op.drop_column("route")
        batch_op.drop_column("message_id")
        batch_op.alter_column("verification_id", existing_type=sa.String(length=40), nullable=False)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_list")
    op.drop_table("messages")
