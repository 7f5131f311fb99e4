"""Which language an OTP is written in: a client's BCP 47 tag, else the destination's country.

A tag falls back from the most specific template to the least: region, then
script, then language, then English (`pt-BR` -> `pt` unless a `pt-BR`
template exists). Chinese without a script takes the one its region writes
(`zh-TW`, `zh-HK`, `zh-MO` -> `zh-Hant`; `zh`, `zh-CN`, `zh-SG` -> `zh-Hans`).
A well-formed tag naming a language without a template gets English; only a
malformed tag is refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass

from relay.sms.countries import country_language
from relay.sms.templates import BUILT_IN_LOCALES

DEFAULT_LOCALE = "en"

# Language, then optional script and region: enough for the tags clients send.
_BCP47 = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?", re.ASCII)
_TRADITIONAL_REGIONS = frozenset({"TW", "HK", "MO"})
# Deprecated codes still sent by old platforms (Java's Locale kept them for years).
_ALIASES = {"iw": "he", "in": "id", "ji": "yi", "no": "nb"}


class MalformedLocale(ValueError):
    """The tag is not a BCP 47 language tag."""

    def __init__(self, tag: str) -> None:
        super().__init__(f"not a BCP 47 language tag: {tag!r}")
        self.tag = tag


@dataclass(frozen=True)
class LanguageTag:
    language: str
    script: str | None = None
    region: str | None = None

    def __str__(self) -> str:
        return "-".join(part for part in (self.language, self.script, self.region) if part)

    def fallbacks(self) -> tuple[str, ...]:
        """The tags to look a template up by, most specific first, without English."""
        return _fallbacks(self)


# Every send looks its locale up (the verification's, then its texts'): a tag's answers
# are kept, for as many tags as clients commonly send.
@functools.lru_cache(maxsize=512)
def _fallbacks(tag: LanguageTag) -> tuple[str, ...]:
    script = tag.script or _implied_script(tag.language, tag.region)
    ordered = [
        LanguageTag(tag.language, script, tag.region),
        LanguageTag(tag.language, script),
        LanguageTag(tag.language, None, tag.region),
        LanguageTag(tag.language),
    ]
    return tuple(dict.fromkeys(str(each) for each in ordered))


def is_valid_bcp47(tag: str) -> bool:
    """Syntax check: 2-3 letter language, optional 4-letter script, optional region."""
    return _BCP47.fullmatch(tag) is not None


@functools.lru_cache(maxsize=512)  # as `_fallbacks`; a LanguageTag is immutable
def parse_locale(tag: str) -> LanguageTag:
    """The tag in its canonical case (`EN-gb` -> `en-GB`); `_` is taken for `-`."""
    normalized = tag.strip().replace("_", "-")
    if not is_valid_bcp47(normalized):
        raise MalformedLocale(tag)
    language, *rest = normalized.split("-")
    script = next((part.title() for part in rest if len(part) == 4), None)
    region = next((part.upper() for part in rest if len(part) != 4), None)
    language = language.lower()
    return LanguageTag(_ALIASES.get(language, language), script, region)


def normalize_locale(tag: str) -> str:
    """The canonical spelling of a well-formed tag; MalformedLocale otherwise."""
    return str(parse_locale(tag))


def resolve_locale(
    tag: str | None,
    *,
    country: str | None = None,
    available: Collection[str] = BUILT_IN_LOCALES,
) -> str:
    """The template locale to use: from `tag` if given, else from the destination's country.

    `available` holds canonical tags (the built-in ones, and an account's own).
    """
    if tag is None:
        spoken = country_language(country)
        if spoken is None:
            return DEFAULT_LOCALE
        tag = spoken
    for candidate in parse_locale(tag).fallbacks():
        if candidate in available:
            return candidate
    return DEFAULT_LOCALE


def _implied_script(language: str, region: str | None) -> str | None:
    if language != "zh":
        return None
    return "Hant" if region in _TRADITIONAL_REGIONS else "Hans"
