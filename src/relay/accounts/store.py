"""SQL for accounts, keys and webhook signing secrets."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, insert, or_, select, update

from relay.accounts.models import ApiKey, Caller
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, accounts, api_keys, webhook_secrets

K = api_keys.c


def insert_account(
    conn: Connection, *, account_id: str, name: str, brand: str, now: datetime
) -> None:
    conn.execute(insert(accounts).values(id=account_id, name=name, brand=brand, created_at=now))


def account_exists(conn: Connection, account_id: str) -> bool:
    found = conn.execute(select(accounts.c.id).where(accounts.c.id == account_id)).first()
    return found is not None


def active_key_count(conn: Connection, account_id: str, *, livemode: bool) -> int:
    query = (
        select(func.count())
        .select_from(api_keys)
        .where(K.account_id == account_id, K.livemode == livemode, K.revoked_at.is_(None))
    )
    return int(conn.execute(query).scalar_one())


def insert_key(
    conn: Connection,
    *,
    key_id: str,
    account_id: str,
    livemode: bool,
    key_hash: str,
    last4: str,
    now: datetime,
) -> None:
    conn.execute(
        insert(api_keys).values(
            id=key_id,
            account_id=account_id,
            livemode=livemode,
            key_hash=key_hash,
            last4=last4,
            created_at=now,
        )
    )


def _key_from_row(row: Row[Any]) -> ApiKey:
    return ApiKey(
        id=row.id,
        account_id=row.account_id,
        livemode=row.livemode,
        last4=row.last4,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def list_keys(conn: Connection, account_id: str | None) -> list[ApiKey]:
    query = select(api_keys).order_by(K.account_id, K.id)
    if account_id is not None:
        query = query.where(K.account_id == account_id)
    return [_key_from_row(row) for row in conn.execute(query)]


def revoke_key(conn: Connection, key_id: str, *, now: datetime) -> bool:
    result = conn.execute(
        update(api_keys).where(K.id == key_id, K.revoked_at.is_(None)).values(revoked_at=now)
    )
    return result.rowcount == 1


# Built once: authentication runs on every request.
_CALLER_FOR_HASH = Prepared(
    select(
        K.id,
        K.account_id,
        K.livemode,
        accounts.c.brand,
        accounts.c.webotp_domain,
        accounts.c.allowed_countries,
    )
    .join(accounts, accounts.c.id == K.account_id)
    .where(K.key_hash == bindparam("hash"), K.revoked_at.is_(None))
)


def caller_for_hash(conn: Connection, key_hash: str) -> Caller | None:
    row = _CALLER_FOR_HASH.execute(conn, {"hash": key_hash}).first()
    if row is None:
        return None
    return Caller(
        account_id=row.account_id,
        brand=row.brand,
        webotp_domain=row.webotp_domain,
        livemode=row.livemode,
        key_id=row.id,
        allowed_countries=(
            None if row.allowed_countries is None else frozenset(row.allowed_countries)
        ),
    )


def set_allowed_countries(
    conn: Connection, account_id: str, countries: frozenset[str] | None
) -> bool:
    stored = None if countries is None else sorted(countries)
    result = conn.execute(
        update(accounts).where(accounts.c.id == account_id).values(allowed_countries=stored)
    )
    return result.rowcount == 1


def insert_webhook_secret(
    conn: Connection, *, secret_id: str, account_id: str, sealed: bytes, now: datetime
) -> None:
    conn.execute(
        insert(webhook_secrets).values(
            id=secret_id, account_id=account_id, sealed_secret=sealed, created_at=now
        )
    )


_SECRET = webhook_secrets.c
# Built once: webhook delivery reads it for every attempt it signs.
_ACTIVE_WEBHOOK_SECRETS = Prepared(
    select(_SECRET.id, _SECRET.sealed_secret)
    .where(
        _SECRET.account_id == bindparam("account_id"),
        or_(
            _SECRET.expires_at.is_(None),
            _SECRET.expires_at > bindparam("now", type_=UtcDateTime()),
        ),
    )
    .order_by(_SECRET.id.desc())
)


def active_webhook_secrets(
    conn: Connection, account_id: str, *, now: datetime
) -> list[tuple[str, bytes]]:
    rows = _ACTIVE_WEBHOOK_SECRETS.execute(conn, {"account_id": account_id, "now": now})
    return [(row.id, row.sealed_secret) for row in rows]


def expire_webhook_secrets(conn: Connection, account_id: str, *, at: datetime) -> int:
    """End the account's active secrets at `at` (a roll's overlap), never later than set."""
    secret = webhook_secrets.c
    result = conn.execute(
        update(webhook_secrets)
        .where(
            secret.account_id == account_id,
            or_(secret.expires_at.is_(None), secret.expires_at > at),
        )
        .values(expires_at=at)
    )
    return int(result.rowcount)
