"""cache_generations: a counter per kind of record processes keep in memory

Every change to what a process may hold of an API key (the key's revocation,
roll or ranges, its account's brand, countries, WebOTP domain or own texts)
adds one to the `keys` row in the same transaction. A process that sees the
counter move drops what it holds (relay.db.changes).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "cache_generations",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.bulk_insert(table, [{"name": "keys", "generation": 0}])


def downgrade() -> None:
    op.drop_table("cache_generations")
