"""api keys: rolls, network restrictions, last use and last refusal

A rolled key keeps working until `expires_at`; a key with `networks` answers
only requests from those CIDR ranges. `last_used_at` and the last refusal are
notes written at most once per key per minute by each process, never per request.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("networks", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_refused_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_refused_reason", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("last_refused_reason")
        batch_op.drop_column("last_refused_at")
        batch_op.drop_column("last_used_at")
        batch_op.drop_column("networks")
        batch_op.drop_column("expires_at")
