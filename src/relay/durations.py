"""Durations as settings take them: a number of seconds, or a number and a unit.

Units: `s` seconds, `m` minutes, `h` hours, `d` days, `w` weeks. `m` is minutes, never
months: a month has no fixed length, and "1m" as a minute matches `sleep`, Go and
systemd. Whole or decimal numbers; the result is whole seconds, at least one.
"""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")


def parse_duration(value: object) -> int:
    """Whole seconds of `value` (an int, a float or a text such as "90s", "12h", "30d").

    ValueError, saying what is accepted, for anything else or for less than a second.
    """
    if isinstance(value, bool):
        raise ValueError(_ACCEPTED)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (found := _DURATION.fullmatch(value.lower())):
        seconds = float(found.group(1)) * UNITS[found.group(2) or "s"]
    else:
        raise ValueError(_ACCEPTED)
    if not seconds >= 1 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"{value!r}: a duration must be at least one second")
    return int(seconds)


def shown(seconds: int) -> str:
    """The shortest text `parse_duration` reads back as `seconds`."""
    for unit in ("w", "d", "h", "m"):
        if seconds % UNITS[unit] == 0:
            return f"{seconds // UNITS[unit]}{unit}"
    return f"{seconds}s"


_ACCEPTED = (
    "a duration is a number of seconds or a number with a unit: s (seconds),"
    ' m (minutes), h (hours), d (days), w (weeks), e.g. "90s", "12h", "30d"'
)
