"""An account's own texts, per channel and locale: what they may hold and how they are filled.

A custom text names the code as `{code}` and the account as `{brand}` (both
required: the text goes out under the operator's shared sender, and the
person who gets it must see whose code it is), and may name `{minutes}` (the
code's remaining validity, in whole minutes). Any other brace is refused, so
that a text can never reach `str.format` with a field or a format spec the
renderer did not plan for. WhatsApp sends the template Meta approved, so
custom texts exist for `sms` and `email` only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal, Protocol

from relay.sms.encoding import segment_count
from relay.sms.locales import parse_locale
from relay.sms.text import (
    BRAND_MAX_SEPTETS,
    fill,
    render_sms,
    sanitize_brand,
    with_webotp_line,
)

CustomChannel = Literal["sms", "email"]
CUSTOM_CHANNELS: tuple[CustomChannel, ...] = ("sms", "email")
PLACEHOLDERS = ("code", "brand", "minutes")
# An SMS text past 480 characters is 4 GSM-7 segments or 8 UCS-2 ones: a mistake, not a code.
MAX_LENGTH: Mapping[str, int] = MappingProxyType({"sms": 480, "email": 2000})

# The longest words a text is filled with: a brand of the most an SMS shows, the
# longest code (the Send API's and `code_length`'s 10) and a day's validity in minutes.
LONGEST_BRAND = "B" * BRAND_MAX_SEPTETS
LONGEST_CODE = "0" * 10
LONGEST_MINUTES = 24 * 60

_FIELD = re.compile(r"(\{[^{}]*\})")
_LINE_BREAKS = frozenset("\n")


class TemplateInvalid(ValueError):
    """A custom text Relay refuses, with a message that says why in one line."""


@dataclass(frozen=True)
class CustomTemplates:
    """An account's texts by (channel, canonical locale)."""

    texts: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def locales(self) -> frozenset[str]:
        return frozenset(locale for _, locale in self.texts)

    @classmethod
    def of(cls, texts: Mapping[tuple[str, str], str]) -> CustomTemplates:
        """The texts a message may use: one stored before `{brand}` was required, which
        does not name it, is left out, and Relay's own words go instead."""
        kept = {where: text for where, text in texts.items() if names_brand(text)}
        return cls(MappingProxyType(kept))

    def for_locale(self, locale: str) -> Mapping[str, str]:
        """Channel -> text for a message in `locale`: the exact locale, then its language."""
        if not self.texts:
            return _NONE_CHOSEN
        chosen: dict[str, str] = {}
        for channel in CUSTOM_CHANNELS:
            for candidate in parse_locale(locale).fallbacks():
                if (channel, candidate) in self.texts:
                    chosen[channel] = self.texts[channel, candidate]
                    break
        return MappingProxyType(chosen)


NO_TEMPLATES = CustomTemplates()
_NONE_CHOSEN: Mapping[str, str] = MappingProxyType({})


class Words(Protocol):
    """What a text is filled from (`relay.carriers.base.Passcode`). `code` is secret."""

    @property
    def code(self) -> str: ...
    @property
    def brand(self) -> str: ...
    @property
    def locale(self) -> str: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def templates(self) -> Mapping[str, str]: ...


def check_template(channel: str, text: str) -> None:
    """TemplateInvalid unless `text` is a usable custom text for `channel`."""
    if channel not in CUSTOM_CHANNELS:
        raise TemplateInvalid(
            f"custom texts are for sms and email, not {channel!r} "
            "(WhatsApp sends the template Meta approved)"
        )
    if len(text) > MAX_LENGTH[channel]:
        raise TemplateInvalid(
            f"an {channel} text has at most {MAX_LENGTH[channel]} characters, not {len(text)}"
        )
    if any(_is_control(ch) for ch in text):
        raise TemplateInvalid("control characters are refused, except line breaks")
    names = [_placeholder(part) for part in _FIELD.split(text)[1::2]]
    for literal in _FIELD.split(text)[::2]:
        if "{" in literal or "}" in literal:
            raise TemplateInvalid(
                "unbalanced brace: only {code}, {brand} and {minutes} may stand in braces"
            )
    if "code" not in names:
        raise TemplateInvalid("the text must hold {code}")
    if "brand" not in names:
        raise TemplateInvalid(
            "the text must hold {brand}: it goes out under the shared sender, and whoever"
            " gets it must see whose code it is"
        )


def names_brand(text: str) -> bool:
    """Whether a stored text names the account (a text that passed `check_template` does)."""
    return "{brand}" in text


def remaining_minutes(expires_at: datetime, *, now: datetime) -> int:
    """Whole minutes the code stays valid, rounded up, at least 1."""
    return max(1, math.ceil((expires_at - now).total_seconds() / 60))


def render_text(words: Words, channel: str, *, now: datetime) -> str:
    """The account's text for `channel` if it has one for the locale, else Relay's own words.

    Without the WebOTP line, which only an SMS carries (`relay.delivery.owners.Draft`).
    """
    custom = words.templates.get(channel)
    if custom is None:
        return render_sms(locale=words.locale, brand=words.brand, code=words.code)
    minutes = remaining_minutes(words.expires_at, now=now)
    return fill(custom, brand=words.brand, code=words.code, minutes=minutes)


def sms_segments(text: str, *, brand: str) -> int:
    """Segments an SMS text takes with a 6-digit code, the account's brand and `{minutes}` 10."""
    return segment_count(fill(text, brand=brand or "Relay", code="000000", minutes=10))


def longest_segments(text: str, *, brand: str, webotp_domain: str | None = None) -> int:
    """The most SMS segments `text` can take: filled with the longest brand an SMS shows
    and with the account's own (whose alphabet may differ), the longest code and
    validity, and the WebOTP line when the account has a domain."""
    counts = [
        segment_count(
            with_webotp_line(
                fill(text, brand=shown, code=LONGEST_CODE, minutes=LONGEST_MINUTES),
                LONGEST_CODE,
                webotp_domain,
            )
        )
        for shown in (LONGEST_BRAND, sanitize_brand(brand) or "Relay")
    ]
    return max(counts)


def _placeholder(part: str) -> str:
    name = part[1:-1]
    if name not in PLACEHOLDERS:
        raise TemplateInvalid(
            f"unknown placeholder {part}: only {{code}}, {{brand}} and {{minutes}} are allowed,"
            " without format specs"
        )
    return name


def _is_control(ch: str) -> bool:
    # Format characters (Cf) stay: Persian and Hindi need ZWNJ, emoji need ZWJ.
    return ch not in _LINE_BREAKS and unicodedata.category(ch) == "Cc"
