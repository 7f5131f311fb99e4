"""idempotency and limits

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 00:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("allowed_countries", sa.JSON(), nullable=True))

    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("account_id", "livemode", "key", name="uq_idempotency_keys_scope"),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index("ix_idempotency_keys_created", ["created_at"], unique=False)

    op.create_table(
        "abuse_counters",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sends", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("approvals", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("failed_checks", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("account_id", "livemode", "kind", "subject", "bucket"),
    )
    with op.batch_alter_table("abuse_counters", schema=None) as batch_op:
        batch_op.create_index("ix_abuse_counters_bucket", ["bucket"], unique=False)

    op.create_table(
        "destination_blocks",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=16), nullable=False),
        sa.Column("blocked_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("account_id", "livemode", "kind", "subject"),
    )


def downgrade() -> None:
    op.drop_table("destination_blocks")
    with op.batch_alter_table("abuse_counters", schema=None) as batch_op:
        batch_op.drop_index("ix_abuse_counters_bucket")
    op.drop_table("abuse_counters")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_idempotency_keys_created")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.drop_column("allowed_countries")
