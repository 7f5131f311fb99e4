"""Destination numbers: E.164 parsing and the number types an SMS code may go to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import phonenumbers
from phonenumbers import (
    COUNTRY_CODE_TO_REGION_CODE,
    PhoneMetadata,
    PhoneNumber,
    PhoneNumberDesc,
    PhoneNumberType,
)

from relay.errors import PhoneNumberInvalid, PhoneNumberUnsupported
from relay.records import fast_init

_E164 = re.compile(r"^\+[1-9]\d{6,14}$")
# The same in ASCII digits only: what `_parsed` reads without the library's parser.
_ASCII_E164 = re.compile(r"\+[1-9][0-9]{6,14}")

# The library compiles its metadata's patterns on every call through `re`'s cache,
# which numbers from many regions overflow (512 patterns): kept for the process instead.
phonenumbers.enable_pattern_cache()

# The sandbox's scripted numbers (US "500" personal numbers). They work with
# test keys only; with live keys they are refused like any non-mobile number.
SANDBOX_NUMBERS = frozenset(
    {"+15005550006", "+15005550001", "+15005550002", "+15005550003", "+15005550004"}
)

# SMS to these types either costs the sender extra (premium, shared cost) or
# never reaches a handset, so a code sent there is money burnt.
_SMS_REACHABLE = frozenset(
    {PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE_OR_MOBILE, PhoneNumberType.VOIP}
)


@fast_init
@dataclass(frozen=True)
class Destination:
    """Where a code goes. For the email channel `e164` holds the normalized address,
    `country` is "" and `mailbox` the mailbox it reaches (relay.verifications.destinations)."""

    e164: str
    country: str
    # An email address's mailbox (`email_address.mailbox_of`), which limits count by;
    # None for a number, already one form per destination.
    mailbox: str | None = None

    @property
    def key(self) -> str:
        """What the limits and the one pending verification count by."""
        return self.mailbox or self.e164

    @property
    def redacted(self) -> str:
        return "…" + self.e164[-4:]


def parse_destination(raw: str, *, livemode: bool, param: str = "to") -> Destination:
    if not _E164.match(raw):
        raise PhoneNumberInvalid(
            "The number must be in E.164 form, such as +14155552671.", param=param
        )
    split = _split(raw)
    if split is None:
        try:
            number = phonenumbers.parse(raw, None)
        except phonenumbers.NumberParseException as exc:
            raise PhoneNumberInvalid(param=param) from exc
        code, national = number.country_code, phonenumbers.national_significant_number(number)
    else:
        code, national = split
    # The type in the number's own region is UNKNOWN exactly when the number is
    # valid nowhere (is_valid_number asks the same), so one lookup answers both.
    country, kind = _region_and_type(code, national)
    if country is None or kind == PhoneNumberType.UNKNOWN:
        raise PhoneNumberInvalid(param=param)
    if country is None or len(country) != 2 or not country.isalpha():
        # Non-geographic ranges (+881 satellite, +882/+883 international networks)
        # have no country to route, allow-list or bill by, and cost a premium.
        raise PhoneNumberUnsupported(
            "SMS codes cannot be sent to non-geographic numbers.", param=param
        )
    if not (raw in SANDBOX_NUMBERS and not livemode):
        _require_sms_reachable(kind, param)
    return Destination(e164=raw, country=country)


def _parsed(raw: str) -> PhoneNumber:
    """`phonenumbers.parse(raw, None)` for a number in E.164 form, as `_split` reads it."""
    split = _split(raw)
    if split is None:
        return phonenumbers.parse(raw, None)
    code, national = split
    return PhoneNumber(country_code=code, national_number=int(national))


def _split(raw: str) -> tuple[int, str] | None:
    """The country code and national number `phonenumbers.parse(raw, None)` reads in
    a number in E.164 form; None where the library itself must be asked.

    The library's parser takes any spelling of a number (spaces, letters, an
    extension, a dialling prefix): over half of what a number costs. For a `+`,
    a country code and ASCII digits its answer is the country code and the rest
    as a number, unless the rest starts with a leading zero or with what the
    country's numbering plan strips as a national prefix (the library then
    decides what is kept, and is asked). Held to the library's answer by
    tests/unit/test_phone_parsing.py.
    """
    if _ASCII_E164.fullmatch(raw) is None:
        return None
    for size in (1, 2, 3):
        code = int(raw[1 : size + 1])
        if code in COUNTRY_CODE_TO_REGION_CODE:
            break
    else:
        return None  # no such country code: the library refuses it
    national = raw[size + 1 :]
    prefix = _national_prefix(code)
    if national[0] == "0" or (prefix is not None and prefix.match(national) is not None):
        return None
    return code, national


_NATIONAL_PREFIXES: dict[int, re.Pattern[str] | None] = {}


def _national_prefix(code: int) -> re.Pattern[str] | None:
    """What the numbering plan of `code` strips from the start of a national number."""
    if code not in _NATIONAL_PREFIXES:
        region = phonenumbers.region_code_for_country_code(code)
        metadata = PhoneMetadata.metadata_for_region_or_calling_code(code, region)
        pattern = None if metadata is None else metadata.national_prefix_for_parsing
        _NATIONAL_PREFIXES[code] = re.compile(pattern) if pattern else None
    return _NATIONAL_PREFIXES[code]


def _region_and_type(code: int | None, national: str) -> tuple[str | None, int]:
    """`phonenumbers.region_code_for_number` and `phonenumbers.number_type` of the
    number with country code `code` and national significant number `national`.

    Asked one after the other, the library works out the region twice, and where
    regions share a country code (+1, +7, +44...) it does so by typing the number
    against each region's plan in turn: the type found in the region that answers
    is the number's type. By the library's own rules over its public metadata;
    held to its answers by tests/unit/test_phone_parsing.py.
    """
    regions = None if code is None else COUNTRY_CODE_TO_REGION_CODE.get(code)
    if code is None or regions is None:
        return None, PhoneNumberType.UNKNOWN
    region = regions[0]
    if len(regions) > 1:
        for region in regions:
            metadata = PhoneMetadata.metadata_for_region(region.upper(), None)
            if metadata is None:
                continue
            if metadata.leading_digits is not None:
                if _pattern(metadata.leading_digits).match(national) is not None:
                    break
                continue
            kind = _type_in_plan(national, metadata)
            if kind != PhoneNumberType.UNKNOWN:
                return region, kind
        else:
            return None, PhoneNumberType.UNKNOWN
    metadata = PhoneMetadata.metadata_for_region_or_calling_code(code, region)
    if metadata is None:
        return region, PhoneNumberType.UNKNOWN
    return region, _type_in_plan(national, metadata)


def _type_in_plan(national: str, metadata: PhoneMetadata) -> int:
    """The type of a national number in one region's numbering plan, UNKNOWN when the
    plan has no such number (the library's order: the costly types first)."""
    plan = _plan(metadata)
    if not _matches(national, plan.general):
        return PhoneNumberType.UNKNOWN
    for kind, desc in plan.costly:
        if _matches(national, desc):
            return kind
    if _matches(national, plan.fixed_line):
        if plan.same or _matches(national, plan.mobile):
            return PhoneNumberType.FIXED_LINE_OR_MOBILE
        return PhoneNumberType.FIXED_LINE
    if not plan.same and _matches(national, plan.mobile):
        return PhoneNumberType.MOBILE
    return PhoneNumberType.UNKNOWN


class _Desc(NamedTuple):
    """A `PhoneNumberDesc` that can match: its lengths (None: any) and its pattern."""

    lengths: frozenset[int] | None
    pattern: re.Pattern[str]


class _Plan(NamedTuple):
    """A region's metadata as `_type_in_plan` reads it, made once per region."""

    metadata: PhoneMetadata
    general: _Desc | None
    costly: tuple[tuple[int, _Desc], ...]
    fixed_line: _Desc | None
    mobile: _Desc | None
    same: bool


_COSTLY_TYPES = (
    (PhoneNumberType.PREMIUM_RATE, "premium_rate"),
    (PhoneNumberType.TOLL_FREE, "toll_free"),
    (PhoneNumberType.SHARED_COST, "shared_cost"),
    (PhoneNumberType.VOIP, "voip"),
    (PhoneNumberType.PERSONAL_NUMBER, "personal_number"),
    (PhoneNumberType.PAGER, "pager"),
    (PhoneNumberType.UAN, "uan"),
    (PhoneNumberType.VOICEMAIL, "voicemail"),
)
# By the id of a metadata object the plan holds, so the id stays its own.
_PLANS: dict[int, _Plan] = {}


def _plan(metadata: PhoneMetadata) -> _Plan:
    found = _PLANS.get(id(metadata))
    if found is not None and found.metadata is metadata:
        return found
    costly = ((kind, _desc(getattr(metadata, name))) for kind, name in _COSTLY_TYPES)
    found = _PLANS[id(metadata)] = _Plan(
        metadata=metadata,
        general=_desc(metadata.general_desc),
        costly=tuple((kind, desc) for kind, desc in costly if desc is not None),
        fixed_line=_desc(metadata.fixed_line),
        mobile=_desc(metadata.mobile),
        same=bool(metadata.same_mobile_and_fixed_line_pattern),
    )
    return found


def _desc(desc: PhoneNumberDesc | None) -> _Desc | None:
    """None for a description no number matches (none, or no pattern)."""
    if desc is None or not desc.national_number_pattern:
        return None
    return _Desc(frozenset(desc.possible_length) or None, _pattern(desc.national_number_pattern))


def _matches(national: str, desc: _Desc | None) -> bool:
    """Whether a national number is one of `desc`'s: one of its lengths, when it has
    any, and the whole number matching its pattern."""
    if desc is None:
        return False
    lengths = desc.lengths
    if lengths is not None and len(national) not in lengths:
        return False
    return desc.pattern.fullmatch(national) is not None


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(text: str) -> re.Pattern[str]:
    """The metadata's patterns, compiled once for the process (a fixed, bounded set)."""
    found = _PATTERNS.get(text)
    if found is None:
        found = _PATTERNS[text] = re.compile(text)
    return found


def _require_sms_reachable(kind: int, param: str) -> None:
    if kind in _SMS_REACHABLE:
        return
    name = {
        PhoneNumberType.PREMIUM_RATE: "premium-rate",
        PhoneNumberType.SHARED_COST: "shared-cost",
        PhoneNumberType.FIXED_LINE: "landline",
        PhoneNumberType.TOLL_FREE: "toll-free",
        PhoneNumberType.PERSONAL_NUMBER: "personal",
        PhoneNumberType.PAGER: "pager",
        PhoneNumberType.UAN: "UAN",
        PhoneNumberType.VOICEMAIL: "voicemail",
    }.get(kind, "non-mobile")
    raise PhoneNumberUnsupported(f"SMS codes cannot be sent to {name} numbers.", param=param)
