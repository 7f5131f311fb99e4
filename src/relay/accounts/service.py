"""Account and key use cases: each runs in one unit of work."""

from __future__ import annotations

from datetime import datetime, timedelta

from relay.accounts import store
from relay.accounts.models import (
    MAX_ACTIVE_KEYS_PER_MODE,
    ApiKey,
    Caller,
    Mode,
    NewAccount,
    key_mode,
    key_prefix,
)
from relay.clock import Clock
from relay.crypto import Keyring, generate_secret, hash_api_key
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.errors import AuthenticationFailed, InvalidRequest, ResourceMissing
from relay.ids import new_id


class KeyLimitReached(InvalidRequest):
    code = "key_limit_reached"
    default_message = (
        f"An account has at most {MAX_ACTIVE_KEYS_PER_MODE} active keys per mode; revoke one first."
    )


class AccountService:
    def __init__(self, db: Db, keyring: Keyring, clock: Clock) -> None:
        self._db = db
        self._keyring = keyring
        self._clock = clock

    async def create_account(self, name: str, *, brand: str | None = None) -> NewAccount:
        now = self._clock.now()
        account_id = new_id("acct")
        test_key = generate_secret(key_prefix("test"))
        live_key = generate_secret(key_prefix("live"))
        secret = generate_secret("whsec_")
        secret_id = new_id("whs")
        sealed = self._keyring.seal(secret_id, secret)

        async def work(tx: Tx) -> None:
            await store.insert_account(
                tx, account_id=account_id, name=name, brand=brand or name, now=now
            )
            for raw in (test_key, live_key):
                await _insert_key(tx, account_id, raw, now)
            await store.insert_webhook_secret(
                tx, secret_id=secret_id, account_id=account_id, sealed=sealed, now=now
            )

        await self._db.write(work)
        return NewAccount(account_id, name, test_key, live_key, secret)

    async def set_allowed_countries(
        self, account_id: str, countries: frozenset[str] | None
    ) -> None:
        """Geo permissions: sends to other countries are refused before any cost."""
        if not await self._db.write(
            lambda tx: store.set_allowed_countries(tx, account_id, countries)
        ):
            raise ResourceMissing(f"No account {account_id}.")

    async def create_key(self, account_id: str, mode: Mode) -> tuple[ApiKey, str]:
        now = self._clock.now()
        raw = generate_secret(key_prefix(mode))

        async def work(tx: Tx) -> ApiKey:
            if not await store.account_exists(tx, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            if (
                await store.active_key_count(tx, account_id, livemode=mode == "live")
                >= MAX_ACTIVE_KEYS_PER_MODE
            ):
                raise KeyLimitReached()
            return await _insert_key(tx, account_id, raw, now)

        return await self._db.write(work), raw

    async def list_keys(self, account_id: str | None = None) -> list[ApiKey]:
        return await self._db.read(lambda tx: store.list_keys(tx, account_id))

    async def revoke_key(self, key_id: str) -> None:
        now = self._clock.now()
        if not await self._db.write(lambda tx: store.revoke_key(tx, key_id, now=now)):
            raise ResourceMissing(f"No active key {key_id}.")

    async def authenticate(self, raw_key: str | None) -> Caller:
        # One answer for every failure, so probing reveals nothing about which keys exist.
        if raw_key is None or key_mode(raw_key) is None:
            raise AuthenticationFailed()
        key_hash = hash_api_key(raw_key)
        # One statement, outside any transaction: this runs on every request.
        caller = await self._db.read(lambda tx: store.caller_for_hash(tx, key_hash))
        if caller is None:
            raise AuthenticationFailed()
        return caller

    async def roll_webhook_secret(self, account_id: str, *, overlap: float) -> tuple[str, datetime]:
        """A new whsec_ secret (returned once) and when the previous ones stop signing.

        Until then every delivery carries one v1= per active secret, so
        receivers can switch to the new secret without losing a delivery.
        """
        now = self._clock.now()
        ends = now + timedelta(seconds=overlap)
        secret = generate_secret("whsec_")
        secret_id = new_id("whs")
        sealed = self._keyring.seal(secret_id, secret)

        async def work(tx: Tx) -> None:
            if not await store.account_exists(tx, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            await store.expire_webhook_secrets(tx, account_id, at=ends)
            await store.insert_webhook_secret(
                tx, secret_id=secret_id, account_id=account_id, sealed=sealed, now=now
            )

        await self._db.write(work)
        return secret, ends


async def _insert_key(tx: Tx, account_id: str, raw: str, now: datetime) -> ApiKey:
    return await store.insert_key(
        tx,
        key_id=new_id("key"),
        account_id=account_id,
        livemode=key_mode(raw) == "live",
        key_hash=hash_api_key(raw),
        last4=raw[-4:],
        now=now,
    )
