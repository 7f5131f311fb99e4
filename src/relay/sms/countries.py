"""The language an OTP is written in when the client names none: the destination's country.

As Twilio Verify and Vonage Verify do. One language per country, the one
most of its people read an OTP in; a country whose language has no template
(built in or the account's own) gets English, and so does every country not
listed. Multilingual countries take their majority language (Belgium Dutch,
Switzerland German, Canada English); India takes English, the language Indian
services send codes in.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


def _spoken(language: str, countries: str) -> dict[str, str]:
    return dict.fromkeys(countries.split(), language)


COUNTRY_LANGUAGES: Mapping[str, str] = MappingProxyType(
    {
        **_spoken(
            "fr",
            "FR MC LU SN CI ML BF NE TG BJ GN CD CG GA CM MG HT PF NC RE GP MQ GF YT PM "
            "WF BL MF DJ TD CF BI KM",
        ),
        **_spoken("es", "ES MX AR CO PE VE CL EC GT CU BO DO HN PY SV NI CR PA UY PR GQ"),
        **_spoken("pt", "PT BR AO MZ CV GW ST TL"),
        **_spoken("de", "DE AT CH LI"),
        **_spoken("it", "IT SM VA"),
        **_spoken("nl", "NL BE SR AW CW SX BQ"),
        **_spoken("sv", "SE AX"),
        **_spoken("pl", "PL"),
        **_spoken("tr", "TR"),
        **_spoken("ro", "RO MD"),
        **_spoken("ru", "RU BY KZ KG"),
        **_spoken("uk", "UA"),
        **_spoken("ar", "SA AE EG IQ JO KW LB LY MA OM QA SY TN YE BH DZ SD PS MR"),
        **_spoken("he", "IL"),
        **_spoken("id", "ID"),
        **_spoken("vi", "VN"),
        **_spoken("th", "TH"),
        **_spoken("ja", "JP"),
        **_spoken("ko", "KR"),
        **_spoken("zh-Hans", "CN"),
        **_spoken("zh-Hant", "TW HK MO"),
        # No built-in template: these apply when an account writes its own.
        **_spoken("fi", "FI"),
        **_spoken("da", "DK"),
        **_spoken("nb", "NO"),
        **_spoken("cs", "CZ"),
        **_spoken("sk", "SK"),
        **_spoken("hu", "HU"),
        **_spoken("el", "GR CY"),
        **_spoken("bg", "BG"),
        **_spoken("hr", "HR"),
        **_spoken("sr", "RS"),
        **_spoken("sl", "SI"),
        **_spoken("et", "EE"),
        **_spoken("lv", "LV"),
        **_spoken("lt", "LT"),
        **_spoken("ms", "MY"),
        **_spoken("bn", "BD"),
        **_spoken("fa", "IR"),
    }
)


def country_language(country: str | None) -> str | None:
    """The language tag for an ISO 3166 alpha-2 country, if it has one."""
    return None if country is None else COUNTRY_LANGUAGES.get(country.upper())
