"""Failed carrier callbacks, per carrier: counted, answered 429 past a budget, logged in
bounded lines (decision 0043).

Anyone can make a provider post to Relay's callback URL, and anyone can post to it
directly, so a flood of badly signed callbacks must neither cost a real receipt nor fill
the log. The signature is always checked first, and only a callback whose signature
fails is counted: a correctly signed one is processed whatever the budget says. Past
`callback_failure_burst` failures in the window (refilled at `callback_failure_rate` a
second), failures are answered 429 with `Retry-After` instead of 401.

The budget is per process and in memory, never in the shared store: it bounds noise,
not guessing (nobody guesses an HMAC-SHA256 or an Ed25519 signature), so it needs no
agreement between processes and keeps working when Redis does not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from relay.config import Settings
from relay.errors import AuthenticationFailed, RateLimited, RelayError
from relay.web.ratelimit import RequestRateLimiter

log = logging.getLogger("relay.callbacks")

# At most one line per carrier this often, counting the refusals it held back.
LOG_EVERY = 60.0
_OVER_BUDGET = (
    "Too many callbacks to this carrier failed their signature check; wait for Retry-After"
    " seconds. A correctly signed callback is always taken."
)


@dataclass
class _Tally:
    next_line: float
    refused: int = 0
    over_budget: int = 0


class CallbackFailures:
    """The failure budget of every carrier's callbacks, and their refusal lines."""

    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window = RequestRateLimiter(
            rate=rate,
            burst=burst,
            storage_uri="memory://",
            namespace="relay-callback-failure",
            clock=clock,
        )
        self._clock = clock
        # One entry per carrier that has refused anything: bounded by the configured
        # carriers, since an unknown name is answered 404 before it gets here.
        self._tallies: dict[str, _Tally] = {}

    @classmethod
    def of(cls, settings: Settings) -> CallbackFailures:
        return cls(rate=settings.callback_failure_rate, burst=settings.callback_failure_burst)

    async def refusal(self, carrier: str, reason: str, message: str) -> RelayError:
        """Count one failed callback of `carrier`: the answer it gets, 401 with `message`
        within the budget, 429 past it."""
        wait = await self._window.acquire(carrier)
        self._note(carrier, reason, over_budget=wait is not None)
        if wait is None:
            return AuthenticationFailed(message)
        return RateLimited(_OVER_BUDGET, retry_after=wait)

    def _note(self, carrier: str, reason: str, *, over_budget: bool) -> None:
        """The first refusal is logged at once (a wrong secret shows up with the first
        receipt); later ones are counted into the next line, a minute or more on."""
        now = self._clock()
        tally = self._tallies.setdefault(carrier, _Tally(next_line=now))
        tally.refused += 1
        tally.over_budget += over_budget
        if now < tally.next_line:
            return
        log.warning(
            "carrier.callback_refused",
            extra={
                "carrier": carrier,
                "reason": reason,
                "refused": tally.refused,
                "over_budget": tally.over_budget,
            },
        )
        tally.refused = tally.over_budget = 0
        tally.next_line = now + LOG_EVERY
