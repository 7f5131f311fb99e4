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
    """ISO 8601 in UTC with a `Z`, millisecond precision, as the API shows times."""
    # "+00:00" is the only offset an aware UTC time can carry.
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
