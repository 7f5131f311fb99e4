"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-20 23:52:04.189744
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "accounts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("brand", sa.String(length=60), nullable=False),
        sa.Column("webotp_domain", sa.String(length=253), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("last4", sa.String(length=4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index("ix_api_keys_account", ["account_id", "livemode"], unique=False)

    op.create_table(
        "events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("related_id", sa.String(length=40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("webhook_url", sa.String(length=2048), nullable=True),
        sa.Column("delivery_status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_list", ["account_id", "livemode", "id"], unique=False)
        batch_op.create_index(
            "ix_events_related", ["account_id", "livemode", "related_id", "id"], unique=False
        )

    op.create_table(
        "verifications",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("livemode", sa.Boolean(), nullable=False),
        sa.Column("to_number", sa.String(length=16), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("sender", sa.String(length=60), nullable=False),
        sa.Column("locale", sa.String(length=35), nullable=False),
        sa.Column("code_length", sa.Integer(), nullable=False),
        sa.Column("code_mac", sa.LargeBinary(), nullable=False),
        sa.Column("sealed_code", sa.LargeBinary(), nullable=True),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("checks", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("sends", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("webhook_url", sa.String(length=2048), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("canceled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.create_index(
            "ix_verifications_due",
            ["expires_at"],
            unique=False,
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )
        batch_op.create_index(
            "ix_verifications_list", ["account_id", "livemode", "id"], unique=False
        )
        batch_op.create_index(
            "ix_verifications_to", ["account_id", "livemode", "to_number", "id"], unique=False
        )
        batch_op.create_index(
            "uq_verifications_pending_to",
            ["account_id", "livemode", "to_number"],
            unique=True,
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )

    op.create_table(
        "webhook_secrets",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("sealed_secret", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_secrets", schema=None) as batch_op:
        batch_op.create_index("ix_webhook_secrets_account", ["account_id"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("verification_id", sa.String(length=40), nullable=False),
        sa.Column("carrier", sa.String(length=60), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("carrier_message_id", sa.String(length=128), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["verification_id"],
            ["verifications.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index("ix_attempts_verification", ["verification_id", "id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_verification")

    op.drop_table("attempts")
    with op.batch_alter_table("webhook_secrets", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_secrets_account")

    op.drop_table("webhook_secrets")
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_verifications_pending_to",
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )
        batch_op.drop_index("ix_verifications_to")
        batch_op.drop_index("ix_verifications_list")
        batch_op.drop_index(
            "ix_verifications_due",
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )

    op.drop_table("verifications")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_related")
        batch_op.drop_index("ix_events_list")

    op.drop_table("events")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_api_keys_account")

    op.drop_table("api_keys")
    op.drop_table("accounts")
