"""Destinations shown without being given away: what a log line, an erasure's answer or
a redacted record may carry of a phone number or an email address."""

from __future__ import annotations

# Of a number: the `+`, its first digits (country and area) and its last two.
_HEAD = 5
_TAIL = 2


def mask(destination: str) -> str:
    """`+14155552671` as `+1415…71`, `jane@example.com` as `j…@example.com`.

    An email address keeps its domain and the first character of its local part; a
    number its first four digits and last two. A value too short to hide anything by
    that rule is shown as `…`."""
    local, at, domain = destination.rpartition("@")
    if at:
        return f"{local[:1]}…@{domain}" if local else f"…@{domain}"
    if len(destination) <= _HEAD + _TAIL:
        return "…"
    return f"{destination[:_HEAD]}…{destination[-_TAIL:]}"
