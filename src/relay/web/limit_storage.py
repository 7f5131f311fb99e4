"""Where the rate limits' moving windows live, and what holds while that place is gone.

`rate_limit_storage` is `memory://` (each process its own windows) or a store the
processes share (Redis). A shared store that fails (refused, reset, an error answer,
no answer within STORAGE_TIMEOUT) is an outage, not a fault in Relay (decision 0042):
each limiter counts in an in-process window of the same rule until the store answers
again, tried again by one request at most every RETRY_EVERY per limiter; the log says
so in one line a minute at most, and `/readyz` names the store's state without failing,
since every process shares the one store and draining them all would turn a weaker
limit into an outage.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from limits.aio.storage import Storage
from limits.errors import StorageError
from limits.storage import storage_from_string

log = logging.getLogger("relay.limits")
T = TypeVar("T")

# Redis answers in well under a millisecond; a store slower than this is treated as down
# (with room for a first connection, and for a busy event loop).
STORAGE_TIMEOUT = 1.0
RETRY_EVERY = 1.0
WARN_EVERY = 60.0


def is_memory(uri: str) -> bool:
    return uri.removeprefix("async+").startswith("memory://")


def async_storage_uri(uri: str) -> str:
    """Settings name storages as users know them (redis://…); `limits` wants async+redis://…"""
    return uri if uri.startswith("async+") else f"async+{uri}"


def shown(uri: str) -> str:
    """The storage URI as it may be logged: any password is `***`."""
    parts = urlsplit(uri.removeprefix("async+"))
    if parts.password is None:
        return parts.geturl()
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class StoreDown(Exception):
    """The shared store failed just now, or recently: count in this process instead."""


class OutageLog:
    """One warning a minute at most while a store is down (whichever limiter meets it),
    and one line when it answers again after a warning, per process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._warned_at = -math.inf
        self._reported = False

    def down(self, uri: str, error: BaseException) -> None:
        now = self._clock()
        if now - self._warned_at < WARN_EVERY:
            return
        self._warned_at = now
        self._reported = True
        log.warning(
            "rate_limit.storage_unavailable storage=%s error=%s: limits are counted in"
            " each process until it answers (said at most once a minute)",
            shown(uri),
            _describe(error),
        )

    def up(self, uri: str) -> None:
        if self._reported:
            self._reported = False
            log.warning(
                "rate_limit.storage_available storage=%s: limits are shared again", shown(uri)
            )


OUTAGES = OutageLog()


def _describe(error: BaseException) -> str:
    cause = error.storage_error if isinstance(error, StorageError) else error
    text = str(cause).strip() or type(cause).__name__
    if isinstance(cause, TimeoutError):
        text = f"no answer within {STORAGE_TIMEOUT:g} s"
    return text[:200]


class SharedStore:
    """A shared store for one limiter, and whether it is taken to be down.

    `clock` (monotonic seconds) says when to try a store that failed again; tests move it.
    """

    def __init__(
        self, uri: str, *, clock: Callable[[], float] = time.monotonic, outages: OutageLog = OUTAGES
    ) -> None:
        self.uri = async_storage_uri(uri)
        self._clock = clock
        self._outages = outages
        self._storage: Storage | None = None
        self._down_until: float | None = None

    @property
    def storage(self) -> Storage:
        # Built on first use, inside the server's event loop, which the storage binds to.
        if self._storage is None:
            # The Redis client logs every retry of a command at info: three lines per
            # request while the store is down, where one warning a minute is wanted.
            logging.getLogger("coredis").setLevel(logging.WARNING)
            storage = storage_from_string(self.uri, wrap_exceptions=True)
            assert isinstance(storage, Storage), "rate limit storage must be async"
            self._storage = storage
        return self._storage

    @property
    def down(self) -> bool:
        return self._down_until is not None

    async def run(self, work: Callable[[Storage], Awaitable[T]]) -> T:
        """`work`'s answer from the store, or StoreDown."""
        if self._down_until is not None:
            now = self._clock()
            if now < self._down_until:
                raise StoreDown
            # This request tries the store; the others meanwhile count in the process.
            self._down_until = now + RETRY_EVERY
        # Built before the clock starts: building it imports the Redis client.
        storage = self.storage
        try:
            async with asyncio.timeout(STORAGE_TIMEOUT):
                answer = await work(storage)
        except (StorageError, OSError, TimeoutError) as error:
            self._down_until = self._clock() + RETRY_EVERY
            self._outages.down(self.uri, error)
            raise StoreDown from None
        if self._down_until is not None:
            self._down_until = None
            self._outages.up(self.uri)
        return answer


class StorageCheck:
    """`/readyz`'s view of the store: what it reports, never a reason to fail."""

    def __init__(self, uri: str) -> None:
        self._memory = is_memory(uri)
        self._store = None if self._memory else SharedStore(uri)

    async def state(self) -> str:
        if self._store is None:
            return "in process"
        try:
            answered = await self._store.run(lambda storage: storage.check())
        except StoreDown:
            answered = False
        if answered:
            return "ok"
        return "unavailable: limits are counted in each process"
