"""What the operator's `relay accounts list` and `show` read: every part of an account
but its secrets, in one read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.accounts import key_store, store, template_store
from relay.accounts.models import AccountRecord, ApiKey, WebhookSecretAge
from relay.accounts.template_store import AccountTemplate
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.errors import ResourceMissing


@dataclass(frozen=True)
class AccountOverview:
    account: AccountRecord
    keys: list[ApiKey]
    webhook_secrets: list[WebhookSecretAge]
    texts: list[AccountTemplate]


async def list_accounts(db: Db) -> list[AccountRecord]:
    return await db.read(store.list_accounts)


async def overview(db: Db, account_id: str, *, now: datetime) -> AccountOverview:
    async def read(tx: Tx) -> AccountOverview | None:
        account = await store.account(tx, account_id)
        if account is None:
            return None
        return AccountOverview(
            account=account,
            keys=await key_store.list_keys(tx, account_id, now=now),
            webhook_secrets=await store.webhook_secret_ages(tx, account_id, now=now),
            texts=await template_store.list_templates(tx, account_id),
        )

    found = await db.read(read)
    if found is None:
        raise ResourceMissing(f"No account {account_id}.")
    return found
