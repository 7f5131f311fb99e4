"""attempts by the time they were opened: the hour of figures measured routes read

Measured routes read the last hour of attempts once a minute per process;
without this index that read scans every attempt the database keeps.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index("ix_attempts_at", ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_at")
