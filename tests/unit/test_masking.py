"""Masking a destination: enough to tell which one was meant, never enough to reach it."""

from __future__ import annotations

import pytest

from relay.masking import mask


@pytest.mark.parametrize(
    ("destination", "masked"),
    [
        ("+14155552671", "+1415…71"),
        ("+33612345678", "+3361…78"),
        ("jane@example.com", "j…@example.com"),
        ("j@example.com", "j…@example.com"),
        ("@example.com", "…@example.com"),
        ("+1234567", "…67"),
        ("+12345678901", "+1234…01"),
    ],
)
def test_a_destination_keeps_its_head_and_tail_only(destination: str, masked: str) -> None:
    assert mask(destination) == masked


def test_a_masked_number_never_holds_more_than_six_of_its_digits() -> None:
    shown = mask("+447400123456")
    assert sum(ch.isdigit() for ch in shown) == 6
    assert "7400123" not in shown
