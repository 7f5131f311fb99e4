"""The API keys this process knows to be valid: a gate in front of authentication for
clients over a failure budget, so that refusing their guesses reads no database.

Only a gate. A key it admits is still authenticated as any other (its kept record,
or its row), so a revoked key is refused from the next request on whatever this
holds; a key it does not admit is refused as a failure. A key is known when this
process keeps its record as valid (`key_cache`: every key it authenticated), or
when it is in a snapshot of every key that is neither revoked nor past its roll,
read in one statement and held as a 64-bit prefix of each key's SHA-256. A
snapshot is taken only when a gated request brings a key the gate does not know,
never more than once per `refresh_every`, and replaces the whole set: guesses
cost at most one statement per `refresh_every` between them, however many they
are. A valid key is never turned away: a request whose key the gate does not know
waits for a snapshot begun after it arrived (at most `refresh_every` and one
statement), so a key made a moment ago by any process is found. A false match of
the prefix only costs that request the read it would have made without the gate.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable

# At ~70 bytes a hash, a bound of ~70 MB. A snapshot with more valid keys than this
# opens the gate for good in this process: every well-formed key is admitted, and a
# guess costs the one read it costs without the gate.
MAX_KNOWN = 1_000_000
REFRESH_EVERY = 1.0


def _short(key_hash: str) -> int:
    """The first 64 bits of a hex SHA-256: enough to tell keys apart, a third of the memory."""
    return int(key_hash[:16], 16)


def _none(_: str) -> bool:
    return False


class KnownKeys:
    """`load` reads the hashes of every key that still answers (one statement); `kept`
    says whether this process keeps a key's record as valid."""

    def __init__(
        self,
        load: Callable[[], Awaitable[Iterable[str]]],
        *,
        kept: Callable[[str], bool] = _none,
        refresh_every: float = REFRESH_EVERY,
        limit: int = MAX_KNOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._kept = kept
        self._refresh_every = refresh_every
        self._limit = limit
        self._clock = clock
        self._known: set[int] = set()
        self._complete = True
        self._last_load = -math.inf
        self._running: asyncio.Task[None] | None = None
        self._queued: asyncio.Task[None] | None = None
        self.loads = 0

    def __len__(self) -> int:
        return len(self._known)

    def forget(self, key_hash: str) -> None:
        """A key found revoked or past its roll: it will never answer again."""
        self._known.discard(_short(key_hash))

    async def knows(self, key_hash: str) -> bool:
        """Whether the key is one this process knows to be valid, after a snapshot begun
        after this call if it was not known before."""
        short = _short(key_hash)
        if short in self._known or not self._complete or self._kept(key_hash):
            return True
        queued = self._queued
        if queued is None or queued.done():
            queued = self._queued = asyncio.ensure_future(self._refresh())
        # Shielded: a request that goes away does not cancel the snapshot others wait for.
        await asyncio.shield(queued)
        return not self._complete or short in self._known or self._kept(key_hash)

    async def _refresh(self) -> None:
        """One snapshot, begun after every caller that queued for it had asked."""
        running = self._running
        if running is not None:
            await asyncio.wait([running])
        delay = self._last_load + self._refresh_every - self._clock()
        if delay > 0:
            await asyncio.sleep(delay)
        # From here on, a caller needs the next snapshot: this one may have begun before it.
        self._queued = None
        self._running = asyncio.current_task()
        self._last_load = self._clock()
        try:
            loaded = await self._load()
            known = {_short(key_hash) for key_hash in loaded}
            self.loads += 1
        finally:
            self._running = None
        self._complete = len(known) <= self._limit
        self._known = known if self._complete else set()
