"""console_sessions: console sign-ins held on the server, so signing out ends them

A console cookie carries a session id (signed); the session itself is a row,
found by the id's SHA-256. Signing out, or the session's key ceasing to
answer, sets ended_at, and every process refuses the cookie from then on.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=True),
        sa.Column("livemode", sa.Boolean(), nullable=True),
        sa.Column("key_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"]),
        sa.PrimaryKeyConstraint("id_hash"),
    )
    with op.batch_alter_table("console_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_console_sessions_expires", ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("console_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_console_sessions_expires")
    op.drop_table("console_sessions")
