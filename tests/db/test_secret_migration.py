"""Migration 0012: an account's one webhook secret becomes its test and its live secret."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from relay.accounts.service import AccountService
from relay.clock import SystemClock
from relay.crypto import Keyring
from relay.db.driver import Db, open_db
from relay.db.migrate import downgrade, upgrade
from relay.events.service import DeliverySettings, EventService
from relay.ids import new_id
from tests.db.test_migrations import drift, execute, read_rows
from tests.harness import TEST_CODE_KEY
from tests.webhooks.receiver import isolated_database

T = TypeVar("T")
KEYRING = Keyring(TEST_CODE_KEY.encode())
DELIVERY = DeliverySettings(
    timeout=1.0, lease=2.0, schedule=(), allowed_networks=(), ca_bundle=None
)


def on_db(url: str, use: Callable[[Db], Awaitable[T]]) -> T:
    async def go() -> T:
        db = open_db(url)
        try:
            return await use(db)
        finally:
            await db.close()

    return asyncio.run(go())


def signing(url: str, account_id: str) -> dict[str, list[str]]:
    """What signs the account's events of each mode, as webhook delivery reads it."""

    async def read(db: Db) -> dict[str, list[str]]:
        events = EventService(db, KEYRING, SystemClock(), delivery=DELIVERY, wake=asyncio.Event())
        return {
            "test": await events.signing_secrets(account_id, livemode=False),
            "live": await events.signing_secrets(account_id, livemode=True),
        }

    return on_db(url, read)


def store_secret(url: str, account_id: str, secret: str, *, expires: datetime | None) -> None:
    """A secret as a Relay before 0012 kept it: sealed for its own id, no mode."""
    secret_id = new_id("whs")
    execute(
        url,
        "INSERT INTO webhook_secrets (id, account_id, sealed_secret, created_at, expires_at)"
        " VALUES (:id, :account, :sealed, :t, :expires)",
        id=secret_id,
        account=account_id,
        sealed=KEYRING.seal(secret_id, secret),
        expires=expires,
    )


def test_an_upgrade_gives_both_modes_the_one_secret_with_its_roll_and_each_then_rolls_apart(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_secrets", tmp_path)
    downgrade(url, "0011")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_s', 'S', 'S', :t)"
    )
    now = datetime.now(UTC)
    # A roll in its overlap: the old secret signs for another hour beside the new one.
    store_secret(url, "acct_s", "whsec_retired", expires=now - timedelta(hours=1))
    store_secret(url, "acct_s", "whsec_old", expires=now + timedelta(hours=1))
    store_secret(url, "acct_s", "whsec_new", expires=None)

    upgrade(url)

    assert drift(url) == []
    both = signing(url, "acct_s")
    assert both == {"test": ["whsec_new", "whsec_old"], "live": ["whsec_new", "whsec_old"]}
    expiries = read_rows(
        url, "SELECT livemode, expires_at FROM webhook_secrets ORDER BY livemode, id"
    )
    by_mode = {
        mode: [row["expires_at"] for row in expiries if bool(row["livemode"]) == mode]
        for mode in (False, True)
    }
    assert by_mode[False] == by_mode[True]

    async def roll_test(db: Db) -> str:
        accounts = AccountService(db, KEYRING, SystemClock())
        secret, _ = await accounts.roll_webhook_secret("acct_s", "test", overlap=0)
        return secret

    rolled = on_db(url, roll_test)
    assert signing(url, "acct_s") == {"test": [rolled], "live": ["whsec_new", "whsec_old"]}

    # Stepping back keeps the test secrets, which then sign every event.
    downgrade(url, "0011")
    assert len(read_rows(url, "SELECT id FROM webhook_secrets")) == 4
    upgrade(url)
    assert drift(url) == []
    assert signing(url, "acct_s") == {"test": [rolled], "live": [rolled]}
