"""Destinations shown without being given away: what a log line, an erasure's answer or
a redacted record may carry of a phone number or an email address."""

from __future__ import annotations

# Of a number: the `+`, its first digits (country and area) and its last two, as long as
# at least four digits stay hidden.
_HEAD = 5
_TAIL = 2
_HIDDEN = 4


def mask(destination: str) -> str:
    """`+14155552671` as `+1415…71`, `jane@example.com` as `j…@example.com`.

    An email address keeps its domain and the first character of its local part; a
    number its first four digits and last two, or only its last two where that would
    hide fewer than four (`+1234567` as `…67`)."""
    local, at, domain = destination.rpartition("@")
    if at:
        return f"{local[:1]}…@{domain}" if local else f"…@{domain}"
    if len(destination) < _HEAD + _HIDDEN + _TAIL:
        return f"…{destination[-_TAIL:]}"
    return f"{destination[:_HEAD]}…{destination[-_TAIL:]}"
