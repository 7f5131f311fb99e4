"""GSM 03.38 (3GPP TS 23.038) text encoding and SMS segment arithmetic.

Every segment is billed, so `segment_count` follows what a sender really
transmits: an escape pair (GSM-7) or a surrogate pair (UCS-2) is never split
across two segments, which can cost one more segment than the usual
`ceil(length / 153)` rule of thumb.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

Encoding = Literal["gsm7", "ucs2"]

_ESCAPE = 0x1B

# The default alphabet in code order: the character at index i is septet i.
# Index 0x1B is the escape to the extension table, not a character.
_BASIC_TABLE = (
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
_BASIC: dict[str, int] = {ch: code for code, ch in enumerate(_BASIC_TABLE) if code != _ESCAPE}

# Each extension character is sent as the escape septet followed by this code.
_EXTENSION: dict[str, int] = {
    "\f": 0x0A,
    "^": 0x14,
    "{": 0x28,
    "}": 0x29,
    "\\": 0x2F,
    "[": 0x3C,
    "~": 0x3D,
    "]": 0x3E,
    "|": 0x40,
    "€": 0x65,
}

_GSM7 = frozenset(_BASIC) | frozenset(_EXTENSION)
# A character other than the default alphabet's (one septet each).
_NOT_BASIC = re.compile("[^" + "".join(re.escape(ch) for ch in _BASIC) + "]")

_GSM7_SINGLE, _GSM7_PART = 160, 153  # septets; a part loses 7 to the UDH
_UCS2_SINGLE, _UCS2_PART = 70, 67  # UTF-16 code units; a part loses 3 to the UDH


def is_gsm7(text: str) -> bool:
    """True when every character is in the GSM default alphabet or its extension."""
    return _GSM7.issuperset(text)


def choose_encoding(text: str) -> Encoding:
    """GSM-7 when the text allows it (cheaper), else UCS-2."""
    return "gsm7" if is_gsm7(text) else "ucs2"


def septet_length(text: str) -> int:
    """Septets needed for `text`; extension characters take two. ValueError if not GSM."""
    return sum(_septets(ch, index) for index, ch in enumerate(text))


def encode_gsm7(text: str) -> bytes:
    """One byte per septet (unpacked), as SMPP sends `data_coding=0`. ValueError if not GSM."""
    out = bytearray()
    for index, ch in enumerate(text):
        if ch in _BASIC:
            out.append(_BASIC[ch])
        elif ch in _EXTENSION:
            out += bytes((_ESCAPE, _EXTENSION[ch]))
        else:
            raise _not_gsm7(ch, index)
    return bytes(out)


def segment_count(text: str) -> int:
    """SMS segments (billed units) needed to send `text`; the empty text takes one."""
    # Every send counts its text, most of them of the default alphabet alone: a
    # septet each, counted by their number, not one Python step per character.
    if _NOT_BASIC.search(text) is None:
        return 1 if len(text) <= _GSM7_SINGLE else -(-len(text) // _GSM7_PART)
    if is_gsm7(text):
        return _count(map(_septets, text), single=_GSM7_SINGLE, part=_GSM7_PART)
    if len(text.encode("utf-16-le", "surrogatepass")) // 2 <= _UCS2_SINGLE:
        return 1  # UTF-16 units counted by the codec: a text that fits one segment
    return _count(map(_utf16_units, text), single=_UCS2_SINGLE, part=_UCS2_PART)


def _count(costs: Iterable[int], *, single: int, part: int) -> int:
    sizes = list(costs)
    if sum(sizes) <= single:
        return 1
    segments, used = 1, 0
    for size in sizes:
        # A character's units stay together: if they do not fit, it opens a new part.
        if used + size > part:
            segments, used = segments + 1, 0
        used += size
    return segments


def _septets(ch: str, index: int = 0) -> int:
    if ch in _BASIC:
        return 1
    if ch in _EXTENSION:
        return 2
    raise _not_gsm7(ch, index)


def _utf16_units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _not_gsm7(ch: str, index: int) -> ValueError:
    # Name only the offending character: the full text usually holds a code.
    return ValueError(f"character {ch!r} at index {index} is not in the GSM 03.38 alphabet")
