"""Time as a dependency: domain code takes `now`; edges ask a Clock."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class OffsetClock:
    """The system clock shifted by an adjustable offset, for tests and demos."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


# Cached: an answer shows the same few moments many times (created, updated, sent).
@functools.lru_cache(maxsize=1024)
def isoformat(moment: datetime) -> str:
    """ISO 8601 in UTC with a `Z`, millisecond precision, as the API shows times.

    Each request brings moments of its own (now, an expiry), each missing the cache:
    the text up to the second is kept per second and only the milliseconds are added,
    as a datetime's own `isoformat` with a `timespec` is the dearest part of a miss."""
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return _T_SECONDS.text(moment) + _MILLISECONDS[moment.microsecond // 1000]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SecondTexts:
    """A UTC moment's ISO 8601 text up to its second, `sep` between date and time, kept
    per second since the epoch: a process writes a few moments each second, and a
    datetime's `isoformat` is the dearest part of writing one."""

    KEPT = 4096

    def __init__(self, sep: str) -> None:
        self._sep = sep
        self._kept: dict[int, str] = {}

    def text(self, moment: datetime) -> str:
        since = moment - _EPOCH
        second = since.days * 86_400 + since.seconds
        head = self._kept.get(second)
        if head is None:
            if len(self._kept) >= self.KEPT:
                self._kept.clear()
            head = self._kept[second] = moment.isoformat(self._sep, "seconds")[:19]
        return head


# "YYYY-MM-DDTHH:MM:SS", as the API shows times.
_T_SECONDS = SecondTexts("T")
_MILLISECONDS = tuple(f".{millisecond:03d}Z" for millisecond in range(1000))
