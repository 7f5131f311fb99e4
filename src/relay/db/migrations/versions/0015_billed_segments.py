"""billed segments: on each attempt, and summed in the usage counters

Every SMS segment is billed, so spend is segments times price, not sends times price.
An attempt records how many segments its carrier bills once the carrier has
accepted it; the usage counter adds them up beside its count. Attempts and
counters written before this revision bill nothing (NULL, 0).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("segments", sa.Integer(), nullable=True))
    with op.batch_alter_table("usage", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("segments", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("usage", schema=None) as batch_op:
        batch_op.drop_column("segments")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("segments")
