"""Abuse rules, pure: counts in, decisions out; every rule takes `now`.

Counters live in five-minute buckets, so a "last hour" or "last 24 hours"
window slides in five-minute steps and a Retry-After can say exactly when
enough old sends leave the window for the next request to pass. The
account's counter, read over a day by every send for the daily cap, lives
in hourly buckets: a day of five-minute buckets is 288 rows (times their
shards) to add up on each send, and that cost would grow with the traffic
of the day before (docs/decisions/0007-abuse-counters-of-bounded-size.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from relay.records import fast_init

BUCKET = timedelta(minutes=5)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class Kind(StrEnum):
    """What a counter or a block is about."""

    PREFIX = "prefix"  # the destination number minus its last four digits
    COUNTRY = "country"
    NUMBER = "number"
    ACCOUNT = "account"  # subject "": the whole account in one mode


class GuardMode(StrEnum):
    ENFORCE = "enforce"
    SHADOW = "shadow"  # log what would be blocked, block nothing
    OFF = "off"


@dataclass(frozen=True)
class Rules:
    number_verifications_per_hour: int = 10
    number_failed_checks_per_day: int = 20
    test_mode_factor: int = 10
    daily_sms_cap: int = 10_000
    guard: GuardMode = GuardMode.ENFORCE
    prefix_min_sends: int = 30
    country_min_sends: int = 300
    min_conversion: float = 0.10
    block_for: timedelta = HOUR

    def per_number(self, cap: int, *, livemode: bool) -> int:
        """Test keys get relaxed per-number caps: integration suites reuse a few numbers."""
        return cap if livemode else cap * self.test_mode_factor


@fast_init
@dataclass(frozen=True)
class Bucket:
    start: datetime
    sends: int = 0
    approvals: int = 0
    failed_checks: int = 0


@fast_init
@dataclass(frozen=True)
class Totals:
    """A window's counters added up (over its buckets and their shards)."""

    sends: int = 0
    approvals: int = 0
    failed_checks: int = 0


def step_of(kind: Kind) -> timedelta:
    """How long one bucket of `kind`'s counters lasts."""
    return HOUR if kind is Kind.ACCOUNT else BUCKET


# A request asks for the buckets of its one `now` several times (its windows, its counters).
@functools.lru_cache(maxsize=64)
def bucket_of(now: datetime, step: timedelta = BUCKET) -> datetime:
    steps = (now - _EPOCH) // step
    return _EPOCH + steps * step


def window_start(now: datetime, length: timedelta, step: timedelta = BUCKET) -> datetime:
    """The oldest bucket (of `step`) still inside a window of `length` ending now."""
    return bucket_of(now, step) - length + step


def seconds_until(moment: datetime, now: datetime) -> int:
    return max(1, math.ceil((moment - now).total_seconds()))


def wait_for_buckets(
    counts: Sequence[tuple[datetime, int]], *, cap: int, length: timedelta, now: datetime
) -> int | None:
    """None while the window's total is under `cap`; otherwise the seconds until enough
    of the oldest buckets leave the window for one more to fit."""
    total = sum(count for _, count in counts)
    if total < cap:
        return None
    leaves_at = now + length
    for start, count in sorted(counts):
        total -= count
        leaves_at = start + length
        if total < cap:
            break
    return seconds_until(leaves_at, now)


def wait_for_times(
    times: Sequence[datetime], *, cap: int, length: timedelta, now: datetime
) -> int | None:
    """The same rule over exact timestamps (verifications opened for one number)."""
    recent = sorted(moment for moment in times if moment > now - length)
    if len(recent) < cap:
        return None
    return seconds_until(recent[len(recent) - cap] + length, now)


def looks_like_pumping(
    sends: int, approvals: int, *, min_sends: int, min_conversion: float
) -> bool:
    """Many codes sent, almost none used: the signature of SMS pumping (toll fraud)."""
    return sends >= min_sends and approvals < min_conversion * sends


def prefix_of(e164: str) -> str:
    return e164[:-4]


def redacted_prefix(prefix: str) -> str:
    """Enough to find the range in a log, not enough to name a subscriber."""
    return prefix[:5] + "…"


def country_allowed(country: str, allowed: frozenset[str] | None) -> bool:
    return allowed is None or country in allowed
