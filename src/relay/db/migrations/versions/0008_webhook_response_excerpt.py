"""webhook attempts: an excerpt of the receiver's answer

The console shows, for each delivery attempt, the start of what the receiver
answered (printable text only), so an operator can tell a receiver's own error
from a network failure without its logs.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("response_excerpt", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.drop_column("response_excerpt")
