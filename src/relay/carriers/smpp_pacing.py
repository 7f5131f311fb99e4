"""How fast the SMPP carrier may go: submit pacing and reconnect backoff."""

from __future__ import annotations

import random
import time

from relay.carriers.base import CarrierThrottled

__all__ = ["Backoff", "Pacer"]


class Pacer:
    """Spaces submits `1 / per_second` apart; remembers an SMSC's request to back off."""

    def __init__(self, per_second: float | None, *, max_delay: float) -> None:
        self._interval = 1.0 / per_second if per_second else 0.0
        self._max_delay = max_delay
        self._next = 0.0
        self._paused_until = 0.0
        self._pause_code = ""

    def pause(self, seconds: float, code: str) -> None:
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        self._pause_code = code

    def reserve(self) -> float:
        """Seconds to wait before sending; raises CarrierThrottled rather than wait long."""
        now = time.monotonic()
        if self._paused_until > now:
            raise CarrierThrottled(
                self._pause_code,
                "backing off after the SMSC throttled us",
                retry_after=self._paused_until - now,
            )
        slot = max(now, self._next)
        delay = slot - now
        if delay > self._max_delay:
            raise CarrierThrottled("smpp_rate_limited", "over max_per_second", retry_after=delay)
        self._next = slot + self._interval
        return delay


class Backoff:
    """Exponential reconnect delays, `first` doubling up to `longest`, with jitter."""

    def __init__(self, first: float, longest: float) -> None:
        self._first = first
        self._longest = longest
        self._current = first

    def next(self) -> float:
        delay = self._current
        self._current = min(self._current * 2, self._longest)
        # Jitter keeps the binds of many carriers (or many Relays) from
        # reconnecting in lockstep after a shared outage.
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._current = self._first
