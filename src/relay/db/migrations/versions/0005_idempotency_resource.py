"""idempotency: the resource a key's request changed

A key is taken in the transaction that makes its request's change, with the
path of the resource it changed (this column): a holder that died before storing its
answer is answered with that resource as it stands, never run twice.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 03:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resource_path", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_column("resource_path")
