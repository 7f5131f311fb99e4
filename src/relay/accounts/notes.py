"""What the operator is told about a key's use, without a write per request.

A request answered with a key notes when it was last used, and a refused one
why it was refused; each process writes either note at most once per key per
`every` (a minute), so a key hammered from outside its ranges costs one
UPDATE a minute per process, not one per request. The note is for the console
and `relay keys list`; the caller's answer never depends on it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from relay.accounts import key_store
from relay.db.driver import Db

log = logging.getLogger("relay.keys")
NOTE_EVERY = timedelta(minutes=1)
# Keys remembered per process; past it the memory starts over (at worst one more write each).
_MAX_REMEMBERED = 100_000


class Throttle:
    """Whether a key's note is due: at most once per `every`, per process."""

    def __init__(self, every: timedelta = NOTE_EVERY) -> None:
        self.every = every
        self._last: dict[str, datetime] = {}

    def due(self, key_id: str, now: datetime) -> bool:
        last = self._last.get(key_id)
        # A clock set back (a test's, or NTP's) makes the note due rather than silent.
        if last is not None and last <= now < last + self.every:
            return False
        if len(self._last) >= _MAX_REMEMBERED:
            self._last.clear()
        self._last[key_id] = now
        return True


class KeyNotes:
    def __init__(self, db: Db, *, every: timedelta = NOTE_EVERY) -> None:
        self._db = db
        self._used = Throttle(every)
        self._refused = Throttle(every)

    async def used(self, key_id: str, now: datetime) -> None:
        if self._used.due(key_id, now):
            await self._write_quietly(key_id, None, now)

    async def refused(self, key_id: str, reason: str, now: datetime) -> None:
        if self._refused.due(key_id, now):
            await self._write_quietly(key_id, reason, now)

    async def _write_quietly(self, key_id: str, reason: str | None, now: datetime) -> None:
        # A note that cannot be written must not change the request's answer.
        try:
            if reason is None:
                await self._db.write(lambda tx: key_store.note_use(tx, key_id, now=now))
            else:
                await self._db.write(lambda tx: key_store.note_refusal(tx, key_id, reason, now=now))
        except Exception:
            log.warning("keys.note_failed", extra={"key_id": key_id}, exc_info=True)
