"""webhook secrets: one set per mode, test and live

Test events and live events are signed with the secrets of their own mode, so
a test key (and a console session signed in with one) can neither learn nor
roll what signs live events. Every existing secret becomes a test secret and
is copied to live mode with its creation time and any roll's expiry, so each
receiver keeps verifying every delivery with the secret it holds, through a
roll's overlap too; from then on each mode rolls apart.

A sealed secret is bound to the id it was sealed under, and a migration has
no server key to seal a copy afresh: a copy keeps the original's sealed bytes
and names the original in `copied_from`, whose id opens it.

Downgrading keeps the test secrets (the live ones, copies or rolled since, are
deleted): every event is then signed with them again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from relay.ids import new_id

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SECRETS = sa.table(
    "webhook_secrets",
    sa.column("id", sa.String(40)),
    sa.column("account_id", sa.String(40)),
    sa.column("livemode", sa.Boolean()),
    sa.column("sealed_secret", sa.LargeBinary()),
    sa.column("copied_from", sa.String(40)),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("expires_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("webhook_secrets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("livemode", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("copied_from", sa.String(length=40), nullable=True))
    bind = op.get_bind()
    bind.execute(_SECRETS.update().values(livemode=False))
    existing = bind.execute(
        sa.select(
            _SECRETS.c.id,
            _SECRETS.c.account_id,
            _SECRETS.c.sealed_secret,
            _SECRETS.c.created_at,
            _SECRETS.c.expires_at,
        ).order_by(_SECRETS.c.id)
    ).all()
    # In id order, so the copies' ids (time-sortable, all made now) keep the
    # originals' newest-first order within live mode.
    copies = [
        {
            "id": new_id("whs"),
            "account_id": row.account_id,
            "livemode": True,
            "sealed_secret": row.sealed_secret,
            "copied_from": row.id,
            "created_at": row.created_at,
            "expires_at": row.expires_at,
        }
        for row in existing
    ]
    if copies:
        bind.execute(_SECRETS.insert(), copies)
    with op.batch_alter_table("webhook_secrets", schema=None) as batch_op:
        batch_op.alter_column("livemode", existing_type=sa.Boolean(), nullable=False)
        batch_op.drop_index("ix_webhook_secrets_account")
        batch_op.create_index(
            "ix_webhook_secrets_account", ["account_id", "livemode"], unique=False
        )


def downgrade() -> None:
    op.get_bind().execute(_SECRETS.delete().where(_SECRETS.c.livemode == sa.true()))
    with op.batch_alter_table("webhook_secrets", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_secrets_account")
        batch_op.create_index("ix_webhook_secrets_account", ["account_id"], unique=False)
        batch_op.drop_column("copied_from")
        batch_op.drop_column("livemode")
