"""Ids: a prefix and 26 Crockford base32 digits, a 48-bit millisecond clock then 80 random bits."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    clock, random = value >> 80, value & (2**80 - 1)
    assert ids._clock_digits(clock) + ids._random_digits(random) == digits_one_at_a_time(value)


@given(st.integers(0, 2**48 - 1), st.integers(0, 2**80 - 1))
def test_any_clock_and_random_part_are_their_value_in_crockford_base32(
    clock: int, random: int
) -> None:
    body = ids._clock_digits(clock) + ids._random_digits(random)
    assert body == digits_one_at_a_time(clock << 80 | random)
    assert ids.created_ms(f"ver_{body}") == clock


def test_a_new_random_part_starts_below_half_its_range() -> None:
    # Headroom: a millisecond's increments never carry into the clock digits.
    for _ in range(200):
        assert ids.new_id("ver").removeprefix("ver_")[10] in ALPHABET[:16]


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


def test_ids_made_in_one_millisecond_count_up_through_every_carry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generator = ids._Monotonic()
    monkeypatch.setattr(ids, "_GENERATOR", generator)
    monkeypatch.setattr("relay.ids.time.time_ns", lambda: 1_700_000_000_123_456_789)
    first = ids.new_id("evt")
    # The random part just below a carry out of its last two digits, then out of more.
    start = 2**79 - 1500
    generator._last_body = first[4:14] + ids._random_digits(start)
    generator._last_random = None
    made = [ids.new_id("evt") for _ in range(3000)]
    assert [body[4:14] for body in made] == [first[4:14]] * 3000
    assert [number(body[14:]) for body in made] == list(range(start + 1, start + 3001))
    assert sorted(made) == made


def test_the_clock_going_back_still_counts_up(monkeypatch: pytest.MonkeyPatch) -> None:
    now = iter([5_000_000_000_000_000, 4_000_000_000_000_000])
    monkeypatch.setattr(ids, "_GENERATOR", ids._Monotonic())
    monkeypatch.setattr("relay.ids.time.time_ns", lambda: next(now))
    first, second = ids.new_id("ver"), ids.new_id("ver")
    assert second > first
    assert ids.created_ms(second) == ids.created_ms(first) == 5_000_000_000


def number(digits: str) -> int:
    value = 0
    for digit in digits:
        value = value * 32 + ALPHABET.index(digit)
    return value


@pytest.mark.parametrize(
    "value", ["ver_", "ver_0000000 00", "ver_000000000_", "ver_000000000u", "ver_000000000é"]
)
def test_the_time_of_something_not_an_id_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not Crockford base32 digits"):
        ids.created_ms(value)


def test_a_new_id_is_recognised_only_under_its_own_prefix() -> None:
    made = ids.new_id("att")
    assert ids.is_id(made, "att")
    assert not ids.is_id(made, "ver")
    assert not ids.is_id(made[:-1] + "U", "att")  # U is not a Crockford digit
    assert not ids.is_id(made.lower(), "att")
    assert not ids.is_id(made + "0", "att")
    assert not ids.is_id(made[:-1] + "\n", "att")


def test_an_unknown_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix"):
        ids.new_id("usr")
