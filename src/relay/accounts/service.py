"""Account and key use cases: each runs in one transaction."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection

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
from relay.db.engine import Database
from relay.errors import AuthenticationFailed, InvalidRequest, ResourceMissing
from relay.ids import new_id


class KeyLimitReached(InvalidRequest):
    code = "key_limit_reached"
    default_message = (
        f"An account has at most {MAX_ACTIVE_KEYS_PER_MODE} active keys per mode; revoke one first."
    )


class AccountService:
    def __init__(self, db: Database, keyring: Keyring, clock: Clock) -> None:
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

        def work(conn: Connection) -> None:
            store.insert_account(
                conn, account_id=account_id, name=name, brand=brand or name, now=now
            )
            for raw in (test_key, live_key):
                _insert_key(conn, account_id, raw, now)
            store.insert_webhook_secret(
                conn, secret_id=secret_id, account_id=account_id, sealed=sealed, now=now
            )

        await self._db.write(work)
        return NewAccount(account_id, name, test_key, live_key, secret)

    async def set_allowed_countries(
        self, account_id: str, countries: frozenset[str] | None
    ) -> None:
        """Geo permissions: sends to other countries are refused before any cost."""
        if not await self._db.write(
            lambda conn: store.set_allowed_countries(conn, account_id, countries)
        ):
            raise ResourceMissing(f"No account {account_id}.")

    async def create_key(self, account_id: str, mode: Mode) -> tuple[ApiKey, str]:
        now = self._clock.now()
        raw = generate_secret(key_prefix(mode))

        def work(conn: Connection) -> ApiKey:
            if not store.account_exists(conn, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            if (
                store.active_key_count(conn, account_id, livemode=mode == "live")
                >= MAX_ACTIVE_KEYS_PER_MODE
            ):
                raise KeyLimitReached()
            key_id = _insert_key(conn, account_id, raw, now)
            return next(k for k in store.list_keys(conn, account_id) if k.id == key_id)

        return await self._db.write(work), raw

    async def list_keys(self, account_id: str | None = None) -> list[ApiKey]:
        return await self._db.read(lambda conn: store.list_keys(conn, account_id))

    async def revoke_key(self, key_id: str) -> None:
        now = self._clock.now()
        if not await self._db.write(lambda conn: store.revoke_key(conn, key_id, now=now)):
            raise ResourceMissing(f"No active key {key_id}.")

    async def authenticate(self, raw_key: str | None) -> Caller:
        # One answer for every failure, so probing reveals nothing about which keys exist.
        if raw_key is None or key_mode(raw_key) is None:
            raise AuthenticationFailed()
        key_hash = hash_api_key(raw_key)
        caller = await self._db.read(lambda conn: store.caller_for_hash(conn, key_hash))
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

        def work(conn: Connection) -> None:
            if not store.account_exists(conn, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            store.expire_webhook_secrets(conn, account_id, at=ends)
            store.insert_webhook_secret(
                conn, secret_id=secret_id, account_id=account_id, sealed=sealed, now=now
            )

        await self._db.write(work)
        return secret, ends


def _insert_key(conn: Connection, account_id: str, raw: str, now: datetime) -> str:
    key_id = new_id("key")
    store.insert_key(
        conn,
        key_id=key_id,
        account_id=account_id,
        livemode=key_mode(raw) == "live",
        key_hash=hash_api_key(raw),
        last4=raw[-4:],
        now=now,
    )
    return key_id
