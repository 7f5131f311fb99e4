"""SQL for accounts and webhook signing secrets (keys: `relay.accounts.key_store`)."""

from __future__ import annotations

from datetime import datetime

from relay.accounts.models import AccountRecord, WebhookSecretAge
from relay.db.sql import Row, Sql, Tx, document, flag, moment, moment_or_none

_INSERT_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, :name, :brand, :now)"
)
_ACCOUNT_EXISTS = Sql("SELECT id FROM accounts WHERE id = :id")
_ACCOUNT_BRAND = Sql("SELECT brand FROM accounts WHERE id = :id")
_ACCOUNT_WORDS = Sql("SELECT brand, webotp_domain FROM accounts WHERE id = :id")
_ACCOUNT_COLUMNS = "id, name, brand, webotp_domain, created_at, allowed_countries, delete_after"
_ACCOUNTS = Sql(f"SELECT {_ACCOUNT_COLUMNS} FROM accounts ORDER BY id")
_ACCOUNT = Sql(f"SELECT {_ACCOUNT_COLUMNS} FROM accounts WHERE id = :id")
_WEBHOOK_SECRET_AGES = Sql(
    "SELECT id, livemode, created_at, expires_at FROM webhook_secrets"
    " WHERE account_id = :account AND (expires_at IS NULL OR expires_at > :now)"
    " ORDER BY livemode, id"
)
_SET_ALLOWED_COUNTRIES = Sql("UPDATE accounts SET allowed_countries = :countries WHERE id = :id")
_SET_DELETE_AFTER = Sql("UPDATE accounts SET delete_after = :seconds WHERE id = :id")
_INSERT_WEBHOOK_SECRET = Sql(
    "INSERT INTO webhook_secrets (id, account_id, livemode, sealed_secret, created_at)"
    " VALUES (:id, :account, :livemode, :sealed, :now)"
)
# Webhook delivery reads it for every attempt it signs. A copy opens under the
# id of the secret it copies (`copied_from`), which sealed it.
_ACTIVE_WEBHOOK_SECRETS = Sql(
    "SELECT COALESCE(copied_from, id) AS sealed_for, sealed_secret FROM webhook_secrets"
    " WHERE account_id = :account AND livemode = :livemode"
    " AND (expires_at IS NULL OR expires_at > :now) ORDER BY id DESC"
)
_EXPIRE_WEBHOOK_SECRETS = Sql(
    "UPDATE webhook_secrets SET expires_at = :at WHERE account_id = :account"
    " AND livemode = :livemode AND (expires_at IS NULL OR expires_at > :at)"
)


async def insert_account(tx: Tx, *, account_id: str, name: str, brand: str, now: datetime) -> None:
    await tx.execute(_INSERT_ACCOUNT, {"id": account_id, "name": name, "brand": brand, "now": now})


async def account_exists(tx: Tx, account_id: str) -> bool:
    return await tx.fetchrow(_ACCOUNT_EXISTS, {"id": account_id}) is not None


async def account_brand(tx: Tx, account_id: str) -> str | None:
    """The account's brand; None when there is no such account."""
    row = await tx.fetchrow(_ACCOUNT_BRAND, {"id": account_id})
    return None if row is None else str(row["brand"])


async def account_words(tx: Tx, account_id: str) -> tuple[str, str | None] | None:
    """What the account puts in every SMS: its brand and its WebOTP domain (None: no
    such account)."""
    row = await tx.fetchrow(_ACCOUNT_WORDS, {"id": account_id})
    return None if row is None else (str(row["brand"]), row["webotp_domain"])


async def set_allowed_countries(tx: Tx, account_id: str, countries: frozenset[str] | None) -> bool:
    stored = None if countries is None else sorted(countries)
    return await tx.execute(_SET_ALLOWED_COUNTRIES, {"id": account_id, "countries": stored}) == 1


async def set_delete_after(tx: Tx, account_id: str, seconds: int | None) -> bool:
    return await tx.execute(_SET_DELETE_AFTER, {"id": account_id, "seconds": seconds}) == 1


async def insert_webhook_secret(
    tx: Tx, *, secret_id: str, account_id: str, livemode: bool, sealed: bytes, now: datetime
) -> None:
    params = {
        "id": secret_id,
        "account": account_id,
        "livemode": livemode,
        "sealed": sealed,
        "now": now,
    }
    await tx.execute(_INSERT_WEBHOOK_SECRET, params)


async def active_webhook_secrets(
    tx: Tx, account_id: str, *, livemode: bool, now: datetime
) -> list[tuple[str, bytes]]:
    """The mode's active secrets, newest first: (the id each was sealed for, its sealed bytes)."""
    params = {"account": account_id, "livemode": livemode, "now": now}
    rows = await tx.fetch(_ACTIVE_WEBHOOK_SECRETS, params)
    return [(row["sealed_for"], bytes(row["sealed_secret"])) for row in rows]


async def expire_webhook_secrets(tx: Tx, account_id: str, *, livemode: bool, at: datetime) -> int:
    """End the mode's active secrets at `at` (a roll's overlap), never later than set."""
    params = {"account": account_id, "livemode": livemode, "at": at}
    return await tx.execute(_EXPIRE_WEBHOOK_SECRETS, params)


def _account(row: Row) -> AccountRecord:
    countries = document(row["allowed_countries"])
    return AccountRecord(
        id=row["id"],
        name=row["name"],
        brand=row["brand"],
        webotp_domain=row["webotp_domain"],
        created_at=moment(row["created_at"]),
        allowed_countries=None if countries is None else tuple(countries),
        delete_after=None if row["delete_after"] is None else int(row["delete_after"]),
    )


async def list_accounts(tx: Tx) -> list[AccountRecord]:
    return [_account(row) for row in await tx.fetch(_ACCOUNTS)]


async def account(tx: Tx, account_id: str) -> AccountRecord | None:
    row = await tx.fetchrow(_ACCOUNT, {"id": account_id})
    return None if row is None else _account(row)


async def webhook_secret_ages(tx: Tx, account_id: str, *, now: datetime) -> list[WebhookSecretAge]:
    rows = await tx.fetch(_WEBHOOK_SECRET_AGES, {"account": account_id, "now": now})
    return [
        WebhookSecretAge(
            id=row["id"],
            livemode=flag(row["livemode"]),
            created_at=moment(row["created_at"]),
            expires_at=moment_or_none(row["expires_at"]),
        )
        for row in rows
    ]
