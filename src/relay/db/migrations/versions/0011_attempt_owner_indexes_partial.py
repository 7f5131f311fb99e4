"""attempts: each owner index holds only the attempts of its kind of owner

An attempt belongs to a verification or to a message, never both, so every
attempt wrote a NULL entry into one of the two owner indexes,
(verification_id, id) and (message_id, id), that no statement ever looks
up: one b-tree written per send for nothing. Each rebuilt index holds only the
rows whose owner column is set; a statement that compares the column with
a value implies that, so the same statements use them. Rows are unchanged;
the indexes are rebuilt.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 19:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_OWNERS = (("ix_attempts_verification", "verification_id"), ("ix_attempts_message", "message_id"))


def _rebuild(partial: bool) -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        for name, column in _OWNERS:
            predicate = sa.text(f"{column} IS NOT NULL") if partial else None
            batch_op.drop_index(name)
            batch_op.create_index(
                name,
                [column, "id"],
                unique=False,
                sqlite_where=predicate,
                postgresql_where=predicate,
            )


def upgrade() -> None:
    _rebuild(partial=True)


def downgrade() -> None:
    _rebuild(partial=False)
