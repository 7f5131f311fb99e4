"""Prefixed, time-sortable identifiers (ULID layout: 48-bit ms clock + 80 random bits)."""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BODY_LENGTH = 26
PREFIXES = frozenset({"acct", "key", "msg", "ver", "att", "evt", "req", "whs"})


class _Monotonic:
    """Ids made in one process within one millisecond still sort by creation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def next_value(self) -> int:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                self._last_random += 1
            else:
                self._last_ms = ms
                self._last_random = secrets.randbits(79)  # headroom for increments
            return (ms << 80) | self._last_random


_GENERATOR = _Monotonic()


# Every two-digit string, by the 10 bits it stands for: half the steps of one digit at a time.
_PAIRS = tuple(high + low for high in _ALPHABET for low in _ALPHABET)
_PAIR_SHIFTS = tuple(range(120, -1, -10))


def _encode(value: int) -> str:
    """26 Crockford base32 digits of a 128-bit value, most significant first."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def new_id(prefix: str) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{_encode(_GENERATOR.next_value())}"


def is_id(value: str, prefix: str) -> bool:
    head, sep, body = value.partition("_")
    return (
        sep == "_"
        and head == prefix
        and len(body) == _BODY_LENGTH
        and all(c in _ALPHABET for c in body)
    )


def created_ms(value: str) -> int:
    """When an id was made: its 48-bit millisecond clock (Unix time), the first 10 digits."""
    body = value.partition("_")[2]
    ms = 0
    for digit in body[:10]:
        ms = ms * 32 + _ALPHABET.index(digit)
    return ms
