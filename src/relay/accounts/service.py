"""Account and key use cases: each runs in one unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from relay.accounts import key_store, store
from relay.accounts.access import (
    DEFAULT_OVERLAP,
    FoundKey,
    IpAddress,
    check_overlap,
    refusal,
    stored_networks,
)
from relay.accounts.key_cache import KeyCache, changing_keys
from relay.accounts.known_keys import KnownKeys
from relay.accounts.models import (
    MAX_ACTIVE_KEYS_PER_MODE,
    MODES,
    ApiKey,
    Caller,
    Mode,
    NewAccount,
    NewKey,
    RolledKey,
    key_mode,
    key_prefix,
)
from relay.accounts.notes import KeyNotes
from relay.clock import Clock
from relay.config import IpNetwork
from relay.crypto import Keyring, generate_secret, hash_api_key
from relay.db.changes import KEYS
from relay.db.driver import Db
from relay.db.limits import check_length
from relay.db.sql import Tx
from relay.errors import (
    AuthenticationFailed,
    InvalidRequest,
    ParameterInvalid,
    RelayError,
    ResourceMissing,
)
from relay.ids import new_id
from relay.sms.text import sanitize_brand

T = TypeVar("T")


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
        self._notes = KeyNotes(db)
        self.cache = KeyCache(db.changes(KEYS))
        # One notion of the keys this process knows: those it keeps, and the gate's
        # snapshot of every valid key.
        self.known = KnownKeys(self._valid_key_hashes, kept=self._kept_valid)

    async def start(self) -> bool:
        """Begin hearing of key changes made by other processes (`key_cache`), so that
        keys are kept from the first requests on; whether they are heard yet."""
        return await self.cache.start()

    def _kept_valid(self, key_hash: str) -> bool:
        return self.cache.holds_valid(key_hash, self._clock.now())

    async def _valid_key_hashes(self) -> list[str]:
        now = self._clock.now()
        return await self._db.read(lambda tx: key_store.valid_key_hashes(tx, now=now))

    async def create_account(self, name: str, *, brand: str | None = None) -> NewAccount:
        name, brand = account_names(name, brand)
        now = self._clock.now()
        account_id = new_id("acct")
        test_key = generate_secret(key_prefix("test"))
        live_key = generate_secret(key_prefix("live"))
        secrets = {mode: self._new_secret() for mode in MODES}

        async def work(tx: Tx) -> None:
            await store.insert_account(tx, account_id=account_id, name=name, brand=brand, now=now)
            for raw in (test_key, live_key):
                await _insert_key(tx, account_id, raw, now)
            for mode, (_, secret_id, sealed) in secrets.items():
                await store.insert_webhook_secret(
                    tx,
                    secret_id=secret_id,
                    account_id=account_id,
                    livemode=mode == "live",
                    sealed=sealed,
                    now=now,
                )

        await self._db.write(work)
        return NewAccount(
            account_id, name, test_key, live_key, secrets["test"][0], secrets["live"][0]
        )

    def _new_secret(self) -> tuple[str, str, bytes]:
        """A whsec_ secret, its id, and the secret sealed for that id."""
        secret = generate_secret("whsec_")
        secret_id = new_id("whs")
        return secret, secret_id, self._keyring.seal(secret_id, secret)

    async def set_allowed_countries(
        self, account_id: str, countries: frozenset[str] | None
    ) -> None:
        """Geo permissions: sends to other countries are refused before any cost."""
        if not await changing_keys(
            self._db, lambda tx: store.set_allowed_countries(tx, account_id, countries)
        ):
            raise ResourceMissing(f"No account {account_id}.")

    async def set_delete_after(self, account_id: str, seconds: int | None) -> None:
        """How long this account's verifications and messages are kept; None: the setting's.
        Read by the retention prune only, never by a request: no cached key changes."""
        if not await self._db.write(lambda tx: store.set_delete_after(tx, account_id, seconds)):
            raise ResourceMissing(f"No account {account_id}.")

    async def create_key(
        self, account_id: str, mode: Mode, *, networks: Sequence[IpNetwork] | None = None
    ) -> NewKey:
        """A new key (its secret in the answer, this once), optionally restricted to ranges."""
        now = self._clock.now()
        raw = generate_secret(key_prefix(mode))

        async def work(tx: Tx) -> ApiKey:
            if not await store.account_exists(tx, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            livemode = mode == "live"
            count = await key_store.unexpired_key_count(tx, account_id, livemode=livemode, now=now)
            if count >= MAX_ACTIVE_KEYS_PER_MODE:
                raise KeyLimitReached()
            return await _insert_key(tx, account_id, raw, now, stored_networks(networks))

        return NewKey(await self._db.write(work), raw)

    async def list_keys(self, account_id: str | None = None) -> list[ApiKey]:
        now = self._clock.now()
        return await self._db.read(lambda tx: key_store.list_keys(tx, account_id, now=now))

    async def key(self, key_id: str) -> ApiKey:
        now = self._clock.now()
        found = await self._db.read(lambda tx: key_store.key(tx, key_id, now=now))
        if found is None:
            raise ResourceMissing(f"No key {key_id}.")
        return found

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Refused from the next request on, by every process: each drops what it kept
        before this returns (`key_cache`)."""
        now = self._clock.now()
        revoked = await changing_keys(
            self._db, lambda tx: key_store.revoke_key(tx, key_id, now=now)
        )
        if revoked is None:
            raise ResourceMissing(f"No active key {key_id}.")
        return revoked

    async def roll_key(self, key_id: str, overlap: float = DEFAULT_OVERLAP) -> RolledKey:
        """A new key for the same account, mode and ranges; the previous one keeps
        answering for `overlap` seconds (at most 24 h), then is refused."""
        now = self._clock.now()
        ends = now + timedelta(seconds=check_overlap(overlap))
        secrets: list[str] = []

        async def work(tx: Tx) -> tuple[ApiKey, ApiKey]:
            previous = await key_store.start_roll(tx, key_id, ends=ends, now=now)
            if previous is None:
                raise await _roll_refusal(tx, key_id, now)
            raw = generate_secret(key_prefix(previous.mode))
            secrets.append(raw)
            networks = None if previous.networks is None else list(previous.networks)
            return await _insert_key(tx, previous.account_id, raw, now, networks), previous

        key, previous = await changing_keys(self._db, work)
        # A unit may run again after a retry: the secret is the one of the run that committed.
        return RolledKey(key, secrets[-1], previous)

    async def restrict_key(self, key_id: str, networks: Sequence[IpNetwork] | None) -> ApiKey:
        """Only requests from `networks` may use the key (None: from anywhere)."""
        now = self._clock.now()
        stored = stored_networks(networks)
        restricted = await changing_keys(
            self._db, lambda tx: key_store.restrict_key(tx, key_id, stored, now=now)
        )
        if restricted is None:
            raise ResourceMissing(f"No active key {key_id}.")
        return restricted

    async def authenticate(self, raw_key: str | None, client: IpAddress | None = None) -> Caller:
        """The caller; `client` is the request's address (the TCP peer, or what a trusted
        proxy says). A key this process authenticated before costs no statement
        (`key_cache`); any other, the one lookup, outside any transaction."""
        key_hash = _presented_hash(raw_key)
        cache = self.cache
        found = cache.get(key_hash)
        if found is None:
            epoch = cache.epoch
            found = await self._db.read(lambda tx: key_store.find_key(tx, key_hash))
            if found is not None:
                cache.keep(key_hash, found, epoch)
        return await self._accepted(found, key_hash, client)

    async def is_known_key(self, raw_key: str | None) -> bool:
        """Whether `raw_key` is well formed and a key this process knows to be valid
        (one it keeps, or one in the `known_keys` snapshot): no read of its own, at most
        one snapshot a second between all callers. For clients over a failure budget;
        `authenticate` still decides."""
        if raw_key is None or key_mode(raw_key) is None:
            return False
        return await self.known.knows(hash_api_key(raw_key))

    async def _accepted(
        self, found: FoundKey | None, key_hash: str, client: IpAddress | None
    ) -> Caller:
        # One answer for every failure, so probing reveals nothing about which keys exist.
        if found is None:
            raise AuthenticationFailed()
        now = self._clock.now()
        reason = refusal(found, now=now, client=client)
        if reason is not None:
            if found.revoked_at is not None or (
                found.expires_at is not None and found.expires_at <= now
            ):
                # Never answers again; a key out of its ranges still may, elsewhere.
                self.known.forget(key_hash)
            await self._notes.refused(found.caller.key_id, reason, now)
            raise AuthenticationFailed()
        await self._notes.used(found.caller.key_id, now)
        return found.caller

    async def roll_webhook_secret(
        self, account_id: str, mode: Mode, *, overlap: float
    ) -> tuple[str, datetime]:
        """A new whsec_ secret for the mode's events (returned once) and when the
        mode's previous ones stop signing; the other mode's secrets are untouched.

        Until then every delivery of the mode carries one v1= per active
        secret, so receivers can switch to the new secret without losing a delivery.
        """
        now = self._clock.now()
        ends = now + timedelta(seconds=overlap)
        secret, secret_id, sealed = self._new_secret()
        livemode = mode == "live"

        async def work(tx: Tx) -> None:
            if not await store.account_exists(tx, account_id):
                raise ResourceMissing(f"No account {account_id}.")
            await store.expire_webhook_secrets(tx, account_id, livemode=livemode, at=ends)
            await store.insert_webhook_secret(
                tx,
                secret_id=secret_id,
                account_id=account_id,
                livemode=livemode,
                sealed=sealed,
                now=now,
            )

        await self._db.write(work)
        return secret, ends


def account_names(name: str, brand: str | None) -> tuple[str, str]:
    """The name and brand an account is stored with (the brand defaults to the name),
    each checked against its column; ParameterInvalid says which is wrong."""
    name = name.strip()
    if not name:
        raise ParameterInvalid("The account's name must not be empty.", param="name")
    check_length(name, "accounts", "name", param="name", label="The account's name")
    given = (brand or "").strip()
    shown = given or name
    label = "The brand" if given else "The brand (the account's name, when no brand is given)"
    check_length(shown, "accounts", "brand", param="brand", label=label)
    if not sanitize_brand(shown):
        raise ParameterInvalid(f"{label} must hold a character an SMS can show.", param="brand")
    return name, shown


def _presented_hash(raw_key: str | None) -> str:
    """The hash a key is found by; a missing or malformed key is refused before any SQL."""
    if raw_key is None or key_mode(raw_key) is None:
        raise AuthenticationFailed()
    return hash_api_key(raw_key)


async def _insert_key(
    tx: Tx, account_id: str, raw: str, now: datetime, networks: list[str] | None = None
) -> ApiKey:
    return await key_store.insert_key(
        tx,
        key_id=new_id("key"),
        account_id=account_id,
        livemode=key_mode(raw) == "live",
        key_hash=hash_api_key(raw),
        last4=raw[-4:],
        now=now,
        networks=networks,
    )


async def _roll_refusal(tx: Tx, key_id: str, now: datetime) -> RelayError:
    found = await key_store.key(tx, key_id, now=now)
    if found is None or found.state == "revoked":
        return ResourceMissing(f"No active key {key_id}.")
    return InvalidRequest(
        f"Key {key_id} is {found.state}; only an active key rolls (roll its successor).",
        param="key_id",
    )
