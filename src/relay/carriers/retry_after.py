"""How long a provider asks to be left alone: `Retry-After`, or a header of its own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["retry_after", "seconds_header"]


def retry_after(headers: Mapping[str, str], *, now: datetime, default: float) -> float:
    """Seconds to wait from a Retry-After of delay-seconds or HTTP-date form."""
    value = headers.get("Retry-After")
    if not value:
        return default
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until(value, now)
    if seconds is None or not math.isfinite(seconds):
        return default
    return max(0.0, seconds)


def seconds_header(headers: Mapping[str, str], name: str) -> float | None:
    """A header holding a number of seconds, or None when absent or not one."""
    try:
        seconds = float(headers.get(name) or "")
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _seconds_until(http_date: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()
