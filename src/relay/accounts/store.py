"""SQL for accounts and webhook signing secrets (keys: `relay.accounts.key_store`)."""

from __future__ import annotations

from datetime import datetime

from relay.db.sql import Sql, Tx

_INSERT_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, :name, :brand, :now)"
)
_ACCOUNT_EXISTS = Sql("SELECT id FROM accounts WHERE id = :id")
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
