"""Destinations as the console shows them: enough to tell two apart, not to reach one."""

from __future__ import annotations

import pytest

from relay.console.timeline import masked


@pytest.mark.parametrize(
    ("destination", "shown"),
    [
        ("+33612345678", "+•••••••5678"),
        ("ada.lovelace@example.com", "a•••••••••••@example.com"),
        ("a@example.com", "a•••@example.com"),
    ],
)
def test_a_destination_is_masked_but_recognisable(destination: str, shown: str) -> None:
    assert masked(destination) == shown
