"""Per-key request rate limit and per-address budget of failed authentications,
shared by every Relay process when the storage is Redis.

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
from collections.abc import Awaitable, Callable

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay.errors import RateLimited
from relay.services import Services
from relay.web.callers import base_url, bearer_token, scope_caller
from relay.web.errors import error_response
from relay.web.limit_storage import SharedStore, StoreDown, is_memory
from relay.web.peers import client_address, limit_key


def window_item(rate: float, burst: int) -> RateLimitItem:
    seconds = max(1, math.ceil(burst / rate))
    return RateLimitItemPerSecond(max(burst, math.floor(rate * seconds)), seconds)


class LocalMovingWindow:
    """The same moving window as `limits`, for one process: a deque of hit times per key.

    `limits`' in-memory async storage hands its expiry scan to a worker thread
    (`asyncio.to_thread`) on nearly every hit; that hop cost 0.1 to 0.3 ms of
    every request (bench/in_process.py). This keeps the identical rule with no
    thread and no timer. A key whose hits have all left the window is dropped,
    at the latest one window after its last hit: a sweep runs at most once per
    window, so the memory held is bounded by the keys seen in the last two
    windows, not by every key (client address) ever seen.
    """

    def __init__(self, item: RateLimitItem) -> None:
        self.limit = item.amount
        self.window = float(item.get_expiry())
        self._hits: dict[str, deque[float]] = {}
        self._next_sweep = -math.inf

    def __len__(self) -> int:
        """How many keys are held."""
        return len(self._hits)

    def acquire(self, key: str, *, now: float) -> int | None:
        """None if a request at `now` (seconds) fits, and counts it; otherwise whole seconds
        until one does."""
        self._sweep(now)
        hits = self._hits.setdefault(key, deque())
        _slide(hits, now - self.window)
        if len(hits) < self.limit:
            hits.append(now)
            return None
        return max(1, math.ceil(hits[0] + self.window - now))

    def wait(self, key: str, *, now: float) -> int | None:
        """What `acquire` would answer at `now`, without counting anything."""
        self._sweep(now)
        hits = self._hits.get(key)
        if hits is None:
            return None
        _slide(hits, now - self.window)
        if not hits:
            del self._hits[key]
            return None
        if len(hits) < self.limit:
            return None
        return max(1, math.ceil(hits[0] + self.window - now))

    def _sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.window
        start = now - self.window
        for key in [key for key, hits in self._hits.items() if not hits or hits[-1] <= start]:
            del self._hits[key]


def _slide(hits: deque[float], start: float) -> None:
    while hits and hits[0] <= start:
        hits.popleft()


class RequestRateLimiter:
    """A moving window per key, in this process or in the shared storage (Redis).

    `clock` gives the seconds the in-process windows count in (monotonic); tests
    move it. A shared storage counts on its own wall time. While the shared storage
    is down, the same rule is counted in this process (`limit_storage`).
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        storage_uri: str,
        namespace: str = "relay-key",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.item = window_item(rate, burst)
        self._namespace = namespace
        self._clock = clock
        self._limiter: MovingWindowRateLimiter | None = None
        self.local = LocalMovingWindow(self.item) if is_memory(storage_uri) else None
        self.shared = None if self.local is not None else SharedStore(storage_uri, clock=clock)
        self._fallback = LocalMovingWindow(self.item)

    async def acquire(self, key: str) -> int | None:
        """None if the request may run (it is counted); otherwise whole seconds until one may."""
        if self.local is not None:
            return self.local.acquire(key, now=self._clock())
        try:
            return await self._shared(lambda limiter: self._hit(limiter, key))
        except StoreDown:
            return self._fallback.acquire(key, now=self._clock())

    async def wait(self, key: str) -> int | None:
        """What `acquire` would answer, without counting: for budgets spent only by failures."""
        if self.local is not None:
            return self.local.wait(key, now=self._clock())
        try:
            return await self._shared(lambda limiter: self._test(limiter, key))
        except StoreDown:
            return self._fallback.wait(key, now=self._clock())

    async def _shared(
        self, work: Callable[[MovingWindowRateLimiter], Awaitable[int | None]]
    ) -> int | None:
        assert self.shared is not None
        return await self.shared.run(lambda storage: work(self._strategy(storage)))

    def _strategy(self, storage: Storage) -> MovingWindowRateLimiter:
        if self._limiter is None:
            self._limiter = MovingWindowRateLimiter(storage)
        return self._limiter

    async def _hit(self, limiter: MovingWindowRateLimiter, key: str) -> int | None:
        if await limiter.hit(self.item, self._namespace, key):
            return None
        return await self._reset(limiter, key)

    async def _test(self, limiter: MovingWindowRateLimiter, key: str) -> int | None:
        if await limiter.test(self.item, self._namespace, key):
            return None
        return await self._reset(limiter, key)

    async def _reset(self, limiter: MovingWindowRateLimiter, key: str) -> int:
        stats = await limiter.get_window_stats(self.item, self._namespace, key)
        return max(1, math.ceil(stats.reset_time - time.time()))


_FAILURES_REFUSED = (
    "Too many requests from this address failed to authenticate; wait for Retry-After seconds."
)


# Under /v1/ but not API authentication: carrier callbacks prove themselves by their
# signature (budgeted per carrier where they are verified); the OpenAPI document is public.
_TAKES_NO_KEY = ("/v1/carriers/", "/v1/openapi.json")


class RateLimits:
    """For /v1/: failed authentications per client address, then requests per key.

    Only failures (401s) spend an address's budget, and only failures are refused
    once it is spent (decision 0041): a request from an address over its budget is
    authenticated as usual when its key is one this process knows to be valid
    (`accounts.known_keys`), and refused with 429 before any lookup otherwise, so a
    guess costs no database read. Under budget, nothing changes for a valid key:
    one look-up in the window, then its authentication (no read for a key this
    process keeps, `accounts.key_cache`). One instance counts for the chain of ASGI
    layers and the API's one pass (`relay.web.front`) alike.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        settings = services.settings
        self.limiter = RequestRateLimiter(
            rate=settings.rate_limit,
            burst=settings.rate_limit_burst,
            storage_uri=settings.rate_limit_storage,
        )
        self.failures = RequestRateLimiter(
            rate=settings.auth_failure_rate,
            burst=settings.auth_failure_burst,
            storage_uri=settings.rate_limit_storage,
            namespace="relay-auth-failure",
        )

    def client_of(self, scope: Scope) -> str | None:
        """What the request's failures count under; None for paths the limits leave alone."""
        path = scope["path"]
        if not path.startswith("/v1/") or path.startswith(_TAKES_NO_KEY):
            return None
        return limit_key(client_address(scope, self.services.settings.trusted_proxies))

    async def refusal(self, scope: Scope, client: str) -> RateLimited | None:
        wait = await self.failures.wait(client)
        if wait is not None and not await self.services.accounts.is_known_key(bearer_token(scope)):
            return RateLimited(_FAILURES_REFUSED, retry_after=wait)
        caller = await scope_caller(scope, self.services)
        wait = None if caller is None else await self.limiter.acquire(caller.key_id)
        return None if wait is None else RateLimited(retry_after=wait)

    async def count(self, client: str, status: int) -> None:
        """Whichever layer refused the key, the answer's 401 spends the client's budget."""
        if status == 401:
            await self.failures.acquire(client)


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, *, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = self.limits.client_of(scope) if scope["type"] == "http" else None
        if client is None:
            await self.app(scope, receive, send)
            return
        refusal = await self.limits.refusal(scope, client)
        if refusal is not None:
            settings = self.limits.services.settings
            await error_response(refusal, base_url=base_url(scope, settings))(scope, receive, send)
            return

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start":
                await self.limits.count(client, message["status"])
            await send(message)

        await self.app(scope, receive, counting)
