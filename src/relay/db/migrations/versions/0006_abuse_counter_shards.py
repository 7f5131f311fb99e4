"""abuse counters: shards of the shared rows

Every send adds to its account's, its country's and its prefix's counter
rows, and on PostgreSQL each upsert holds that row's lock until its
transaction commits, so concurrent sends queue behind one another there. With
the shard in the primary key, a send adds to one of a few shards of each row,
picked at random, and readers add the shards up.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 04:00:00
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_KEY = ["account_id", "livemode", "kind", "subject", "bucket"]


def upgrade() -> None:
    shard = sa.Column("shard", sa.Integer(), server_default=sa.text("0"), nullable=False)
    if op.get_bind().dialect.name == "postgresql":
        op.add_column("abuse_counters", shard)
        op.drop_constraint("abuse_counters_pkey", "abuse_counters", type_="primary")
        op.create_primary_key("abuse_counters_pkey", "abuse_counters", [*_KEY, "shard"])
        return
    # SQLite changes a primary key by copying the table; SQLAlchemy warns that the copy's
    # key is not the reflected one, which is the point.
    with (
        warnings.catch_warnings(category=sa.exc.SAWarning, action="ignore"),
        op.batch_alter_table("abuse_counters", recreate="always") as batch_op,
    ):
        batch_op.add_column(shard)
        batch_op.create_primary_key("pk_abuse_counters", [*_KEY, "shard"])


def downgrade() -> None:
    # Shards of one row are added back into shard 0 before the column goes.
    op.execute(
        "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard,"
        " sends, approvals, failed_checks) SELECT account_id, livemode, kind, subject, bucket,"
        " -1, SUM(sends), SUM(approvals), SUM(failed_checks) FROM abuse_counters"
        " GROUP BY account_id, livemode, kind, subject, bucket"
    )
    op.execute("DELETE FROM abuse_counters WHERE shard <> -1")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("abuse_counters_pkey", "abuse_counters", type_="primary")
        op.drop_column("abuse_counters", "shard")
        op.create_primary_key("abuse_counters_pkey", "abuse_counters", _KEY)
        return
    with (
        warnings.catch_warnings(category=sa.exc.SAWarning, action="ignore"),
        op.batch_alter_table("abuse_counters", recreate="always") as batch_op,
    ):
        batch_op.drop_column("shard")
        batch_op.create_primary_key("pk_abuse_counters", _KEY)
