"""Relay reads a number in E.164 form without the library's general parser, and gives the
library's answers: the same parsed number, and the same destination or refusal."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from relay.errors import PhoneNumberInvalid, RelayError
from relay.phone import SANDBOX_NUMBERS, Destination, _parsed, _region_and_type, parse_destination

COUNTRY_CODES = sorted(phonenumbers.COUNTRY_CODE_TO_REGION_CODE)
TYPES = [
    value
    for name, value in vars(PhoneNumberType).items()
    if name.isupper() and isinstance(value, int)
]


def example_numbers() -> list[str]:
    """The library's example number of every type in every region and non-geographic code."""
    found = set()
    for region in phonenumbers.SUPPORTED_REGIONS:
        for kind in TYPES:
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                found.add(phonenumbers.format_number(number, PhoneNumberFormat.E164))
    for code in phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS:
        number = phonenumbers.example_number_for_non_geo_entity(code)
        if number is not None:
            found.add(phonenumbers.format_number(number, PhoneNumberFormat.E164))
    return sorted(found)


EXAMPLES = example_numbers()


def library_parse(raw: str) -> phonenumbers.PhoneNumber | int:
    """What the library's parser answers: the number, or its error's type."""
    try:
        return phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException as exc:
        return int(exc.error_type)


def relay_parse(raw: str) -> phonenumbers.PhoneNumber | int:
    try:
        return _parsed(raw)
    except phonenumbers.NumberParseException as exc:
        return int(exc.error_type)


def library_destination(raw: str, *, livemode: bool) -> Destination | tuple[str, str]:
    """The destination as the library's parser alone decides it (Relay's rules before
    it read E.164 itself), or the refusal's class and message."""
    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        return refusal(PhoneNumberInvalid(param="to"))
    country = phonenumbers.region_code_for_number(number)
    kind = PhoneNumberType.UNKNOWN if country is None else phonenumbers.number_type(number)
    if country is None or kind == PhoneNumberType.UNKNOWN:
        return refusal(PhoneNumberInvalid(param="to"))
    return outcome(raw, livemode=livemode)  # the rules after the parse are the same code


def outcome(raw: str, *, livemode: bool) -> Destination | tuple[str, str]:
    try:
        return parse_destination(raw, livemode=livemode)
    except RelayError as error:
        return refusal(error)


def refusal(error: RelayError) -> tuple[str, str]:
    return type(error).__name__, str(error)


e164 = st.builds(
    lambda code, rest: f"+{code}{rest}"[:16],
    st.sampled_from(COUNTRY_CODES) | st.integers(1, 999),
    st.text("0123456789", min_size=4, max_size=14),
).filter(lambda raw: len(raw) >= 8)
# Numbers near the library's examples: a valid number's first digits, any last ones.
near_examples = st.builds(
    lambda raw, keep, rest: (raw[:keep] + rest)[: len(raw)].ljust(len(raw), "5"),
    st.sampled_from(EXAMPLES),
    st.integers(3, 12),
    st.text("0123456789", max_size=10),
).filter(lambda raw: len(raw) >= 8)  # as `e164`: a shorter one is refused before any parse


def test_every_example_number_of_the_library_is_read_as_the_library_reads_it() -> None:
    assert len(EXAMPLES) > 1000
    for raw in EXAMPLES:
        assert relay_parse(raw) == library_parse(raw), raw
        for livemode in (True, False):
            assert outcome(raw, livemode=livemode) == library_destination(raw, livemode=livemode)


@settings(max_examples=3000)
@given(st.one_of(e164, near_examples))
@example("+14155552671")
@example("+4407911123456")  # a national prefix after the country code: the library strips it
@example("+390612345678")  # Italy's leading zero
@example("+5491123456789")  # Argentina's mobile prefix, rewritten by the numbering plan
@example("+8821234567")  # a shared country code of international networks
@example("+2999876543")  # no such country code
def test_a_number_in_e164_form_is_read_as_the_library_reads_it(raw: str) -> None:
    assert relay_parse(raw) == library_parse(raw)
    assert outcome(raw, livemode=True) == library_destination(raw, livemode=True)


@pytest.mark.parametrize("raw", ["+1415555267٣", "+14155552671\n", *sorted(SANDBOX_NUMBERS)])
def test_what_is_not_plain_e164_is_left_to_the_library(raw: str) -> None:
    assert relay_parse(raw) == library_parse(raw)
    assert outcome(raw, livemode=False) == library_destination(raw, livemode=False)


def library_region_and_type(number: phonenumbers.PhoneNumber) -> tuple[str | None, int]:
    return phonenumbers.region_code_for_number(number), phonenumbers.number_type(number)


def relay_region_and_type(number: phonenumbers.PhoneNumber) -> tuple[str | None, int]:
    national = phonenumbers.national_significant_number(number)
    return _region_and_type(number.country_code, national)


def test_every_example_number_has_the_region_and_type_the_library_gives_it() -> None:
    for raw in EXAMPLES:
        number = phonenumbers.parse(raw, None)
        assert relay_region_and_type(number) == library_region_and_type(number), raw


@settings(max_examples=3000)
@given(st.one_of(e164, near_examples))
@example("+14155552671")  # +1: the region is the first of many whose plan has the number
@example("+16135550123")  # Canada, after the regions +1 lists before it
@example("+12642351234")  # Anguilla: a region found by its leading digits
@example("+79123456789")  # +7: Russia and Kazakhstan
@example("+447911123456")  # +44: the UK and the crown dependencies
@example("+8821234567")  # a non-geographic code
def test_a_number_has_the_region_and_type_the_library_gives_it(raw: str) -> None:
    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        return
    assert relay_region_and_type(number) == library_region_and_type(number)
