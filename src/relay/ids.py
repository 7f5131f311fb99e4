"""Prefixed, time-sortable identifiers (ULID layout: 48-bit ms clock + 80 random bits).

The body is 26 Crockford base32 digits: the first 10 the millisecond, the last 16
the random part. Every request makes several (a create five), so the digits are
made in as few interpreter steps as the layout allows: the millisecond's once per
millisecond, a new random part straight from the OS's bytes, and an increment
within a millisecond by rewriting the last two digits only.
"""

from __future__ import annotations

import os
import re
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PREFIXES = frozenset({"acct", "key", "msg", "ver", "att", "evt", "req", "whs"})

# Every two-digit string, by the 10 bits it stands for: half the steps of one digit at a time.
_PAIRS = tuple(high + low for high in _ALPHABET for low in _ALPHABET)
_MASK_30 = (1 << 30) - 1
# A byte's low five bits as a digit: every digit equally likely from a uniform byte.
_DIGIT_OF_BYTE = bytes(ord(_ALPHABET[byte & 31]) for byte in range(256))
# Crockford's digits as int()'s base-32 ones ("0"-"9", "a"-"v"), to read digits back;
# any other byte as one int() refuses (it would take a sign, a space or "_").
_AS_INT_DIGITS = bytes(
    ord("0123456789abcdefghijklmnopqrstuv"[_ALPHABET.index(chr(byte))])
    if chr(byte) in _ALPHABET
    else ord("!")
    for byte in range(256)
)
_BODY = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _clock_digits(ms: int) -> str:
    """The 10 digits of a 48-bit millisecond."""
    pairs, high, low = _PAIRS, ms >> 30, ms & _MASK_30
    return "".join(
        (pairs[high >> 10], pairs[high & 1023], pairs[low >> 20], pairs[(low >> 10) & 1023],
         pairs[low & 1023])
    )  # fmt: skip


def _random_digits(value: int) -> str:
    """The 16 digits of an 80-bit random part."""
    pairs, high, middle, low = _PAIRS, value >> 60, (value >> 30) & _MASK_30, value & _MASK_30
    return "".join(
        (pairs[high >> 10], pairs[high & 1023], pairs[middle >> 20], pairs[(middle >> 10) & 1023],
         pairs[middle & 1023], pairs[low >> 20], pairs[(low >> 10) & 1023], pairs[low & 1023])
    )  # fmt: skip


class _Monotonic:
    """Ids made in one process within one millisecond still sort by creation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        # The last body made, as text, and its random part as a number once a
        # second id in the same millisecond needs one (None until then).
        self._last_body = ""
        self._last_random: int | None = None
        # The clock's first 8 digits change once every 1,024 ms: kept, with their ms >> 10.
        self._clock_head = ""
        self._clock_head_of = -1

    def next_body(self) -> str:
        # acquire/release, not `with`: half the interpreter's steps, on every id.
        self._lock.acquire()
        try:
            return self._next_body()
        finally:
            self._lock.release()

    def _next_body(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms > self._last_ms:
            self._last_ms = ms
            self._last_random = None
            if ms >> 10 != self._clock_head_of:
                self._clock_head_of = ms >> 10
                self._clock_head = _clock_digits(ms)[:8]
            drawn = os.urandom(16)
            # The random part's first digit from four bits: it starts below 2**79,
            # so a millisecond's increments never carry into its clock.
            body = (
                self._clock_head
                + _PAIRS[ms & 1023]
                + _ALPHABET[drawn[0] & 15]
                + drawn[1:].translate(_DIGIT_OF_BYTE).decode()
            )
        else:
            # The clock did not move on (or went back): the last body plus one.
            value = self._last_random
            if value is None:
                value = _number(self._last_body[10:])
            value += 1
            self._last_random = value
            low = value & 1023
            if low:
                body = self._last_body[:24] + _PAIRS[low]
            else:
                body = self._last_body[:10] + _random_digits(value)
        self._last_body = body
        return body


_GENERATOR = _Monotonic()


def new_id(prefix: str) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{_GENERATOR.next_body()}"


def is_id(value: str, prefix: str) -> bool:
    head, sep, body = value.partition("_")
    return sep == "_" and head == prefix and _BODY.fullmatch(body) is not None


def created_ms(value: str) -> int:
    """When an id was made: its 48-bit millisecond clock (Unix time), the first 10 digits."""
    return _number(value.partition("_")[2][:10])


def _number(digits: str) -> int:
    """The number Crockford base32 `digits` stand for; ValueError if one is not a digit."""
    try:
        return int(digits.encode("ascii").translate(_AS_INT_DIGITS), 32)
    except ValueError:
        raise ValueError(f"not Crockford base32 digits: {digits!r}") from None
