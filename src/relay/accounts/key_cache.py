"""The API key records this process has authenticated, kept so that a key seen before
costs no statement, and dropped at every change to one, whichever process made it.

A record is what the request's lookup reads (`key_store.find_key`): the caller
(account, mode, brand, WebOTP domain, allowed countries, whether the account has
texts of its own) and what may refuse it (revoked_at, expires_at, networks).
`access.refusal` decides on it at each request against that request's `now`
and address, so a rolled key stops answering when its overlap ends with no
signal. Revoked keys are kept too: a revocation is for good, so a revoked key
presented again is refused without a read.

Every change to what a record holds goes through `changing_keys`: the change
and the `keys` generation's bump commit together, and it returns once every
process has dropped what it kept (`relay.db.changes`). Records are dropped all
at once, not one by one: changes are rare, and each kept key then costs one
read again in each process.

A read that began before a drop may end after it with the record as it was: it
answers its own request (which came before the change was done) but is not
kept (`epoch`).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import TypeVar

from relay.accounts.access import FoundKey
from relay.db.changes import KEYS, Changes, bump
from relay.db.driver import Db
from relay.db.group_commit import Unit
from relay.db.sql import Tx

T = TypeVar("T")

# Records kept per process (about a kilobyte each); past it the least recently used
# is dropped, and its key costs one read again when it comes back.
MAX_KEPT = 10_000


class KeyCache:
    def __init__(self, changes: Changes, *, limit: int = MAX_KEPT) -> None:
        self._changes = changes
        self._kept: OrderedDict[str, FoundKey] = OrderedDict()
        self._limit = limit
        # Drops so far: a read begun before one is not kept.
        self.epoch = 0
        changes.on_change(self.clear)

    def __len__(self) -> int:
        return len(self._kept)

    async def start(self) -> bool:
        return await self._changes.start()

    def clear(self) -> None:
        self.epoch += 1
        self._kept.clear()

    def get(self, key_hash: str) -> FoundKey | None:
        """The kept record of the key, if it may be used now (`Changes.fresh`)."""
        # Asked even with nothing kept: the first answer is what later ones compare with.
        if not self._changes.fresh():
            return None
        kept = self._kept
        found = kept.get(key_hash)
        if found is not None:
            kept.move_to_end(key_hash)
        return found

    def keep(self, key_hash: str, found: FoundKey, epoch: int) -> None:
        """Keep a record read since `epoch` (the epoch when its read began)."""
        if epoch != self.epoch:
            return
        kept = self._kept
        kept[key_hash] = found
        if len(kept) > self._limit:
            kept.popitem(last=False)

    def holds_valid(self, key_hash: str, now: datetime) -> bool:
        """Whether a kept record says the key is neither revoked nor past its roll at
        `now`; for the known-keys gate, which only admits to authentication."""
        found = self._kept.get(key_hash)
        return (
            found is not None
            and found.revoked_at is None
            and (found.expires_at is None or found.expires_at > now)
        )


async def changing_keys(db: Db, unit: Unit[T]) -> T:
    """Run `unit`, a change to what a key record holds (the key's revocation, roll or
    ranges; its account's brand, countries, WebOTP domain or own texts), with the
    `keys` generation's bump in the same transaction. Returns once every process has
    dropped its kept records: each one's next request reads the change."""
    generations: list[int] = []

    async def work(tx: Tx) -> T:
        value = await unit(tx)
        # A unit run again after a retry bumps again: the last bump is the one committed.
        generations.append(await bump(tx, KEYS))
        return value

    value = await db.write(work)
    await db.changes(KEYS).settled(generations[-1])
    return value
