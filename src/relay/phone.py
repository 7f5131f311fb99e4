"""Destination numbers: E.164 parsing and the number types an SMS code may go to."""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import COUNTRY_CODE_TO_REGION_CODE, PhoneMetadata, PhoneNumber, PhoneNumberType

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
    try:
        number = _parsed(raw)
    except phonenumbers.NumberParseException as exc:
        raise PhoneNumberInvalid(param=param) from exc
    country = phonenumbers.region_code_for_number(number)
    # The type in the number's own region is UNKNOWN exactly when the number is
    # valid nowhere (is_valid_number asks the same), so one lookup answers both.
    kind = PhoneNumberType.UNKNOWN if country is None else phonenumbers.number_type(number)
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
    """`phonenumbers.parse(raw, None)` for a number in E.164 form.

    The library's parser takes any spelling of a number (spaces, letters, an
    extension, a dialling prefix): over half of what a number costs. For a `+`,
    a country code and ASCII digits its answer is the country code and the rest
    as a number, unless the rest starts with a leading zero or with what the
    country's numbering plan strips as a national prefix (the library then
    decides what is kept, and is asked). Held to the library's answer by
    tests/unit/test_phone_parsing.py.
    """
    if _ASCII_E164.fullmatch(raw) is None:
        return phonenumbers.parse(raw, None)
    for size in (1, 2, 3):
        code = int(raw[1 : size + 1])
        if code in COUNTRY_CODE_TO_REGION_CODE:
            break
    else:
        return phonenumbers.parse(raw, None)  # no such country code: the library refuses it
    national = raw[size + 1 :]
    prefix = _national_prefix(code)
    if national[0] == "0" or (prefix is not None and prefix.match(national) is not None):
        return phonenumbers.parse(raw, None)
    return PhoneNumber(country_code=code, national_number=int(national))


_NATIONAL_PREFIXES: dict[int, re.Pattern[str] | None] = {}


def _national_prefix(code: int) -> re.Pattern[str] | None:
    """What the numbering plan of `code` strips from the start of a national number."""
    if code not in _NATIONAL_PREFIXES:
        region = phonenumbers.region_code_for_country_code(code)
        metadata = PhoneMetadata.metadata_for_region_or_calling_code(code, region)
        pattern = None if metadata is None else metadata.national_prefix_for_parsing
        _NATIONAL_PREFIXES[code] = re.compile(pattern) if pattern else None
    return _NATIONAL_PREFIXES[code]


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
