"""account_templates: an account's own OTP texts, per channel (sms, email) and locale

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 12:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "account_templates",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("locale", sa.String(length=35), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("account_id", "channel", "locale"),
    )


def downgrade() -> None:
    op.drop_table("account_templates")
