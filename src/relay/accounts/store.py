"""SQL for accounts, keys and webhook signing secrets."""

from __future__ import annotations

from datetime import datetime

from relay.accounts.models import ApiKey, Caller
from relay.db.sql import Row, Sql, Tx, document, flag, moment, moment_or_none

_KEY_COLUMNS = "id, account_id, livemode, last4, created_at, revoked_at"

_INSERT_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, :name, :brand, :now)"
)
_ACCOUNT_EXISTS = Sql("SELECT id FROM accounts WHERE id = :id")
_ACTIVE_KEY_COUNT = Sql(
    "SELECT count(*) AS n FROM api_keys"
    " WHERE account_id = :account AND livemode = :livemode AND revoked_at IS NULL"
)
_INSERT_KEY = Sql(
    "INSERT INTO api_keys (id, account_id, livemode, key_hash, last4, created_at)"
    f" VALUES (:id, :account, :livemode, :key_hash, :last4, :now) RETURNING {_KEY_COLUMNS}"
)
_ALL_KEYS = Sql(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY account_id, id")
_ACCOUNT_KEYS = Sql(
    f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = :account ORDER BY account_id, id"
)
_REVOKE_KEY = Sql("UPDATE api_keys SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL")
# One indexed read on every request. The raw key never reaches SQL: it is found by its
# SHA-256, so timing reveals nothing about how much of a guessed key matched.
_CALLER_FOR_HASH = Sql(
    "SELECT k.id, k.account_id, k.livemode, a.brand, a.webotp_domain, a.allowed_countries"
    " FROM api_keys k JOIN accounts a ON a.id = k.account_id"
    " WHERE k.key_hash = :hash AND k.revoked_at IS NULL"
)
_SET_ALLOWED_COUNTRIES = Sql("UPDATE accounts SET allowed_countries = :countries WHERE id = :id")
_INSERT_WEBHOOK_SECRET = Sql(
    "INSERT INTO webhook_secrets (id, account_id, sealed_secret, created_at)"
    " VALUES (:id, :account, :sealed, :now)"
)
# Webhook delivery reads it for every attempt it signs.
_ACTIVE_WEBHOOK_SECRETS = Sql(
    "SELECT id, sealed_secret FROM webhook_secrets WHERE account_id = :account"
    " AND (expires_at IS NULL OR expires_at > :now) ORDER BY id DESC"
)
_EXPIRE_WEBHOOK_SECRETS = Sql(
    "UPDATE webhook_secrets SET expires_at = :at"
    " WHERE account_id = :account AND (expires_at IS NULL OR expires_at > :at)"
)


async def insert_account(tx: Tx, *, account_id: str, name: str, brand: str, now: datetime) -> None:
    await tx.execute(_INSERT_ACCOUNT, {"id": account_id, "name": name, "brand": brand, "now": now})


async def account_exists(tx: Tx, account_id: str) -> bool:
    return await tx.fetchrow(_ACCOUNT_EXISTS, {"id": account_id}) is not None


async def active_key_count(tx: Tx, account_id: str, *, livemode: bool) -> int:
    row = await tx.fetchrow(_ACTIVE_KEY_COUNT, {"account": account_id, "livemode": livemode})
    assert row is not None
    return int(row["n"])


async def insert_key(
    tx: Tx,
    *,
    key_id: str,
    account_id: str,
    livemode: bool,
    key_hash: str,
    last4: str,
    now: datetime,
) -> ApiKey:
    """The key as stored (RETURNING: no second read)."""
    params = {
        "id": key_id,
        "account": account_id,
        "livemode": livemode,
        "key_hash": key_hash,
        "last4": last4,
        "now": now,
    }
    row = await tx.fetchrow(_INSERT_KEY, params)
    assert row is not None
    return _key_from_row(row)


def _key_from_row(row: Row) -> ApiKey:
    return ApiKey(
        id=row["id"],
        account_id=row["account_id"],
        livemode=flag(row["livemode"]),
        last4=row["last4"],
        created_at=moment(row["created_at"]),
        revoked_at=moment_or_none(row["revoked_at"]),
    )


async def list_keys(tx: Tx, account_id: str | None) -> list[ApiKey]:
    if account_id is None:
        rows = await tx.fetch(_ALL_KEYS)
    else:
        rows = await tx.fetch(_ACCOUNT_KEYS, {"account": account_id})
    return [_key_from_row(row) for row in rows]


async def revoke_key(tx: Tx, key_id: str, *, now: datetime) -> bool:
    return await tx.execute(_REVOKE_KEY, {"id": key_id, "now": now}) == 1


async def caller_for_hash(tx: Tx, key_hash: str) -> Caller | None:
    row = await tx.fetchrow(_CALLER_FOR_HASH, {"hash": key_hash})
    if row is None:
        return None
    # Rows written before this layer may hold JSON `null` rather than SQL NULL: both read as None.
    allowed = document(row["allowed_countries"])
    return Caller(
        account_id=row["account_id"],
        brand=row["brand"],
        webotp_domain=row["webotp_domain"],
        livemode=flag(row["livemode"]),
        key_id=row["id"],
        allowed_countries=None if allowed is None else frozenset(allowed),
    )


async def set_allowed_countries(tx: Tx, account_id: str, countries: frozenset[str] | None) -> bool:
    stored = None if countries is None else sorted(countries)
    return await tx.execute(_SET_ALLOWED_COUNTRIES, {"id": account_id, "countries": stored}) == 1


async def insert_webhook_secret(
    tx: Tx, *, secret_id: str, account_id: str, sealed: bytes, now: datetime
) -> None:
    params = {"id": secret_id, "account": account_id, "sealed": sealed, "now": now}
    await tx.execute(_INSERT_WEBHOOK_SECRET, params)


async def active_webhook_secrets(
    tx: Tx, account_id: str, *, now: datetime
) -> list[tuple[str, bytes]]:
    rows = await tx.fetch(_ACTIVE_WEBHOOK_SECRETS, {"account": account_id, "now": now})
    return [(row["id"], bytes(row["sealed_secret"])) for row in rows]


async def expire_webhook_secrets(tx: Tx, account_id: str, *, at: datetime) -> int:
    """End the account's active secrets at `at` (a roll's overlap), never later than set."""
    return await tx.execute(_EXPIRE_WEBHOOK_SECRETS, {"account": account_id, "at": at})
