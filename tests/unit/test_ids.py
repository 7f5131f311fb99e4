"""Ids: a prefix and 26 Crockford base32 digits, a 48-bit millisecond clock then 80 random bits."""

from __future__ import annotations

import time

import pytest

from relay import ids

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def digits_one_at_a_time(value: int) -> str:
    """The encoding as the ULID layout defines it: five bits per digit, lowest digit last."""
    out = ""
    for _ in range(26):
        out = ALPHABET[value & 31] + out
        value >>= 5
    return out


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        31,
        32,
        2**80 - 1,
        2**80,
        (2**48 - 1) << 80,
        2**128 - 1,
        0x0123456789ABCDEF0123456789ABCDEF,
    ],
)
def test_the_body_is_the_value_in_crockford_base32(value: int) -> None:
    assert ids._encode(value) == digits_one_at_a_time(value)


def test_the_first_ten_digits_are_the_creation_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    body = ids.new_id("ver").removeprefix("ver_")
    after = time.time_ns() // 1_000_000
    stamp = 0
    for digit in body[:10]:
        stamp = stamp * 32 + ALPHABET.index(digit)
    assert before <= stamp <= after


def test_ids_made_in_a_row_sort_in_the_order_they_were_made() -> None:
    made = [ids.new_id("evt") for _ in range(2000)]
    assert sorted(made) == made
    assert len(set(made)) == len(made)


def test_a_new_id_is_recognised_only_under_its_own_prefix() -> None:
    made = ids.new_id("att")
    assert ids.is_id(made, "att")
    assert not ids.is_id(made, "ver")
    assert not ids.is_id(made[:-1] + "U", "att")  # U is not a Crockford digit


def test_an_unknown_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix"):
        ids.new_id("usr")
