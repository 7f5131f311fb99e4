"""verifications: the expiry index serves only statements that compare expires_at

The expiry sweep's partial index on pending verifications, (expires_at) WHERE
status = 'pending', could serve any statement that states status = 'pending',
whatever it looks for. On tables without statistics yet (a new database,
before autovacuum's first ANALYZE), PostgreSQL priced that small index below
the right one and walked every pending verification to find one: a check by
number scanned them all. The rebuilt predicate also names expires_at, which a
statement implies only by comparing expires_at, as the sweeps do. Rows are
unchanged; the index is rebuilt.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_NAME = "ix_verifications_due"


def _rebuild(predicate: str) -> None:
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.drop_index(_NAME)
        batch_op.create_index(
            _NAME,
            ["expires_at"],
            unique=False,
            sqlite_where=sa.text(predicate),
            postgresql_where=sa.text(predicate),
        )


def upgrade() -> None:
    _rebuild("status = 'pending' AND expires_at IS NOT NULL")


def downgrade() -> None:
    _rebuild("status = 'pending'")
