"""Per-key request rate limit, shared by every Relay process when the storage is Redis.

Algorithm: a moving window, from the `limits` library when the storage is shared
(Redis) and `LocalMovingWindow` in memory, sized like a token bucket
(`limits` has no token bucket). It allows max(BURST, RATE * W) requests in any
W = ceil(BURST / RATE) seconds (at least 1 s): the same burst and the same
long-run rate as a bucket of BURST tokens refilled at RATE per second, except
that after a full burst it waits for the window to slide instead of trickling.
The moving window keeps one timestamp per accepted request, so it is exact, and
processes sharing one Redis never accept more than the limit between them.
"""

from __future__ import annotations

import math
import time
from collections import deque

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from starlette.types import ASGIApp, Receive, Scope, Send

from relay.errors import RateLimited
from relay.services import Services
from relay.web.callers import base_url, defer_key, scope_caller
from relay.web.errors import error_response
from relay.web.idempotency import HEADER as IDEMPOTENCY_HEADER


def window_item(rate: float, burst: int) -> RateLimitItem:
    seconds = max(1, math.ceil(burst / rate))
    return RateLimitItemPerSecond(max(burst, math.floor(rate * seconds)), seconds)


def _is_memory(uri: str) -> bool:
    return uri.removeprefix("async+").startswith("memory://")


def async_storage_uri(uri: str) -> str:
    """Settings name storages as users know them (redis://…); `limits` wants async+redis://…"""
    return uri if uri.startswith("async+") else f"async+{uri}"


class LocalMovingWindow:
    """The same moving window as `limits`, for one process: a deque of hit times per key.

    `limits`' in-memory async storage hands its expiry scan to a worker thread
    (`asyncio.to_thread`) on nearly every hit; that hop cost 0.1 to 0.3 ms of
    every request (bench/in_process.py). This keeps the identical rule with no
    thread and no timer.
    """

    def __init__(self, item: RateLimitItem) -> None:
        self.limit = item.amount
        self.window = float(item.get_expiry())
        self._hits: dict[str, deque[float]] = {}

    def acquire(self, key: str, *, now: float) -> int | None:
        """None if a request at `now` (seconds) fits; otherwise whole seconds until one does."""
        hits = self._hits.setdefault(key, deque())
        start = now - self.window
        while hits and hits[0] <= start:
            hits.popleft()
        if len(hits) < self.limit:
            hits.append(now)
            return None
        return max(1, math.ceil(hits[0] + self.window - now))


class RequestRateLimiter:
    def __init__(self, *, rate: float, burst: int, storage_uri: str) -> None:
        self.item = window_item(rate, burst)
        self._uri = async_storage_uri(storage_uri)
        self._limiter: MovingWindowRateLimiter | None = None
        self._local = LocalMovingWindow(self.item) if _is_memory(storage_uri) else None

    def _strategy(self) -> MovingWindowRateLimiter:
        # Built on first use, inside the server's event loop, which the storage binds to.
        if self._limiter is None:
            storage = storage_from_string(self._uri)
            assert isinstance(storage, Storage), "rate limit storage must be async"
            self._limiter = MovingWindowRateLimiter(storage)
        return self._limiter

    async def acquire(self, key: str) -> int | None:
        """None if the request may run; otherwise whole seconds until one may."""
        if self._local is not None:
            return self._local.acquire(key, now=time.monotonic())
        limiter = self._strategy()
        if await limiter.hit(self.item, "relay-key", key):
            return None
        stats = await limiter.get_window_stats(self.item, "relay-key", key)
        return max(1, math.ceil(stats.reset_time - time.time()))


class RateLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        services: Services,
        deferred: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.app = app
        self.services = services
        settings = services.settings
        self.limiter = RequestRateLimiter(
            rate=settings.rate_limit,
            burst=settings.rate_limit_burst,
            storage_uri=settings.rate_limit_storage,
        )
        # (method, path) of the operations that look their key up themselves (`reads_key`).
        self.deferred = deferred

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            if self._defers(scope):
                # The route looks the key up in its first statement, then applies the limit.
                defer_key(scope, self.services, self.limiter.acquire)
                await self.app(scope, receive, send)
                return
            caller = await scope_caller(scope, self.services)
            wait = None if caller is None else await self.limiter.acquire(caller.key_id)
            if wait is not None:
                refusal = error_response(
                    RateLimited(retry_after=wait), base_url=base_url(scope, self.services.settings)
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _defers(self, scope: Scope) -> bool:
        # A request under an Idempotency-Key is authenticated before its key is claimed.
        return (scope["method"], scope["path"]) in self.deferred and all(
            name != IDEMPOTENCY_HEADER for name, _ in scope["headers"]
        )
