"""events: the endpoint of each webhook, and the due index per endpoint

The delivery loop caps the attempts in flight per endpoint (the URL's scheme,
host and port, as written). Its claim looked for due events across every
endpoint in the order they were due, through the partial index on
(next_attempt_at), and so walked every due event of an endpoint at its cap to
find none it could take. Events carry that endpoint, written with the row,
and the partial index on pending rows is (endpoint, next_attempt_at), so a
claim reads each endpoint with room by its own range and skips a full one
without reading it. Existing rows get the endpoint of their URL.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_PENDING = "delivery_status = 'pending'"
# The rule of `_endpoint` below, in PostgreSQL's SQL: everything before the
# first /, ? or # after the scheme's "://"; the URL itself without "://".
_PG_BACKFILL = (
    "UPDATE events SET endpoint = CASE WHEN strpos(webhook_url, '://') = 0 THEN webhook_url"
    " ELSE left(webhook_url, strpos(webhook_url, '://') + 2)"
    " || substring(substr(webhook_url, strpos(webhook_url, '://') + 3) from '^[^/?#]*') END"
    " WHERE webhook_url IS NOT NULL"
)
_SQLITE_BACKFILL = (
    "UPDATE events SET endpoint = relay_endpoint_0010(webhook_url) WHERE webhook_url IS NOT NULL"
)


def _endpoint(url: str | None) -> str | None:
    """`relay.webhooks.guard.endpoint` as it was at this revision: a migration keeps
    its meaning when the code moves on."""
    if url is None:
        return None
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    for index, char in enumerate(rest):
        if char in "/?#":
            return f"{scheme}://{rest[:index]}"
    return url


def _backfill() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(_PG_BACKFILL)
        return
    # One pass over the table in SQL, the rule computed in Python.
    raw = bind.connection.dbapi_connection
    assert raw is not None
    raw.create_function("relay_endpoint_0010", 1, _endpoint, deterministic=True)
    op.execute(_SQLITE_BACKFILL)


def upgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("endpoint", sa.String(length=2048), nullable=True))
    _backfill()
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_due")
        batch_op.create_index(
            "ix_events_endpoint_due",
            ["endpoint", "next_attempt_at"],
            unique=False,
            sqlite_where=sa.text(_PENDING),
            postgresql_where=sa.text(_PENDING),
        )


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_endpoint_due")
        batch_op.create_index(
            "ix_events_due",
            ["next_attempt_at"],
            unique=False,
            sqlite_where=sa.text(_PENDING),
            postgresql_where=sa.text(_PENDING),
        )
        batch_op.drop_column("endpoint")
