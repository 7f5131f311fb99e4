"""Which destination numbers Relay sends codes to."""

from __future__ import annotations

import pytest

from relay.errors import PhoneNumberInvalid, PhoneNumberUnsupported
from relay.phone import parse_destination


def test_a_mobile_number_resolves_to_its_two_letter_country() -> None:
    destination = parse_destination("+33612345678", livemode=True)
    assert destination.country == "FR"
    assert destination.redacted == "…5678"


@pytest.mark.parametrize("number", ["+881140717553", "+19005550100", "+442079460000"])
def test_non_geographic_premium_and_landline_numbers_are_unsupported(number: str) -> None:
    with pytest.raises(PhoneNumberUnsupported):
        parse_destination(number, livemode=False)


def test_sandbox_numbers_work_with_test_keys_only() -> None:
    assert parse_destination("+15005550006", livemode=False).country == "US"
    with pytest.raises(PhoneNumberUnsupported):
        parse_destination("+15005550006", livemode=True)


@pytest.mark.parametrize("number", ["4155552671", "+1415", "+1415555267a", "+0123456789"])
def test_malformed_numbers_are_invalid(number: str) -> None:
    with pytest.raises(PhoneNumberInvalid):
        parse_destination(number, livemode=False)
