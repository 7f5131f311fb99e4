"""canonical mailbox: an email destination counts as the mailbox it reaches

A verification's `to_number` becomes, for an email address, its mailbox
(`relay.email_address.mailbox_of`: the local part without its `+tag` and
case-folded, the domain IDNA-normalized), which the one pending verification's
unique index, the limits and the look-ups by `to` key on; the address as given,
where its sends go, moves to the new `address` column (NULL for a number). The
wrong codes counted per destination move to the mailbox's counter, added to
what its other spellings counted.

Two spellings of one mailbox may both have a pending verification: of those,
the newest stays pending and the others are closed as expired here, without an
event (a migration has no webhook machinery), so that the unique index holds.

The mailbox is computed in Python, in batches: SQLite's lower() folds ASCII only,
and neither database's case mapping is Python's case folding.

Downgrading puts the addresses back into `to_number`; counters stay by mailbox.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from relay.db.utc_datetime import UtcDateTime
from relay.email_address import mailbox_of

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_BATCH = 1000
_PENDING = sa.text(
    "SELECT id, account_id, livemode, to_number FROM verifications"
    " WHERE to_number LIKE '%@%' AND status = 'pending' ORDER BY id"
)
_EXPIRE = sa.text(
    "UPDATE verifications SET status = 'expired', updated_at = :now, sealed_code = NULL"
    " WHERE id = :id AND status = 'pending'"
).bindparams(sa.bindparam("now", type_=UtcDateTime))
_EMAILS = sa.text(
    "SELECT id, to_number FROM verifications WHERE to_number LIKE '%@%'"
    " AND address IS NULL AND id > :after ORDER BY id LIMIT :limit"
)
_KEYED = sa.text(
    "UPDATE verifications SET address = to_number, to_number = :mailbox WHERE id = :id"
)
_SUBJECTS = sa.text(
    "SELECT DISTINCT subject FROM abuse_counters WHERE kind = 'number' AND subject LIKE '%@%'"
)
_MERGE = sa.text(
    "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard, sends,"
    " approvals, failed_checks) SELECT account_id, livemode, kind, :mailbox, bucket, shard,"
    " sends, approvals, failed_checks FROM abuse_counters WHERE kind = 'number'"
    " AND subject = :subject ON CONFLICT (account_id, livemode, kind, subject, bucket, shard)"
    " DO UPDATE SET sends = abuse_counters.sends + excluded.sends,"
    " approvals = abuse_counters.approvals + excluded.approvals,"
    " failed_checks = abuse_counters.failed_checks + excluded.failed_checks"
)
_DROP = sa.text("DELETE FROM abuse_counters WHERE kind = 'number' AND subject = :subject")


def upgrade() -> None:
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("address", sa.String(length=254), nullable=True))
    bind = op.get_bind()
    _close_all_but_the_newest_pending(bind)
    after = ""
    while rows := bind.execute(_EMAILS, {"after": after, "limit": _BATCH}).all():
        bind.execute(_KEYED, [{"id": row.id, "mailbox": mailbox_of(row.to_number)} for row in rows])
        after = rows[-1].id
    moved = [
        {"subject": subject, "mailbox": mailbox}
        for (subject,) in bind.execute(_SUBJECTS).all()
        if (mailbox := mailbox_of(subject)) != subject
    ]
    for start in range(0, len(moved), _BATCH):
        batch = moved[start : start + _BATCH]
        bind.execute(_MERGE, batch)
        bind.execute(_DROP, batch)


def _close_all_but_the_newest_pending(bind: sa.Connection) -> None:
    """Pending verifications are few (each lives a TTL): read at once."""
    pending: dict[tuple[str, bool, str], list[str]] = defaultdict(list)
    for row in bind.execute(_PENDING).all():
        pending[(row.account_id, bool(row.livemode), mailbox_of(row.to_number))].append(row.id)
    now = datetime.now(UTC)
    # Ids sort by creation: the last of each mailbox's is its newest.
    closed = [{"id": id_, "now": now} for ids in pending.values() for id_ in ids[:-1]]
    if closed:
        bind.execute(_EXPIRE, closed)


def downgrade() -> None:
    op.execute("UPDATE verifications SET to_number = address WHERE address IS NOT NULL")
    with op.batch_alter_table("verifications", schema=None) as batch_op:
        batch_op.drop_column("address")
