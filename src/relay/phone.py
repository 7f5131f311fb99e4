"""Destination numbers: E.164 parsing and the number types an SMS code may go to."""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import PhoneNumberType

from relay.errors import PhoneNumberInvalid, PhoneNumberUnsupported

_E164 = re.compile(r"^\+[1-9]\d{6,14}$")

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
        number = phonenumbers.parse(raw, None)
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
