"""Which approved language of a WhatsApp template a verification's locale gets.

Meta approves a template per language, under one name, and names languages
its own way: `en`, `en_US`, `fr`, `pt_BR`, `zh_CN`, `zh_TW`, `fil`, `prs_AF`
(https://developers.facebook.com/documentation/business-messaging/whatsapp/templates/supported-languages).
Relay's locales are BCP 47 tags (`fr`, `pt-BR`, `zh-Hans`). A code sent that the
template is not approved in is refused (error 132001), so the choice is made
among the languages the operator lists, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["META_LANGUAGE", "meta_language", "template_language_for"]

# A language code as Meta writes one: 2-3 lower-case letters, then an optional
# `_` and an upper-case region (`en`, `fil`, `pt_BR`, `prs_AF`). Meta's codes are
# case-sensitive: `en_us` or `en-US` is no approved language.
META_LANGUAGE = re.compile(r"[a-z]{2,3}(_[A-Z]{2})?")

# Retired ISO 639 codes still met in tags, and Norwegian, which Meta names `nb`.
_ALIASES = {"iw": "he", "in": "id", "no": "nb", "tl": "fil"}
# Chinese is chosen by script: Meta's zh_TW and zh_HK are Traditional, zh_CN Simplified.
_TRADITIONAL_REGIONS = frozenset({"TW", "HK", "MO"})
_SCRIPT_REGIONS = {"hans": "CN", "hant": "TW"}


def meta_language(locale: str) -> str:
    """`locale`, a BCP 47 tag, in Meta's form: `pt-BR` → `pt_BR`, `zh-Hant` → `zh_TW`."""
    subtags = [part for part in re.split(r"[-_]", locale.strip()) if part]
    if not subtags:
        return ""
    language = subtags[0].lower()
    language = _ALIASES.get(language, language)
    script = next((tag.lower() for tag in subtags[1:] if len(tag) == 4 and tag.isalpha()), None)
    region = next((tag.upper() for tag in subtags[1:] if len(tag) == 2 and tag.isalpha()), None)
    if language == "zh" and region is None:
        # Chinese without a region reads as its likeliest one (CLDR): zh → zh_CN.
        region = _SCRIPT_REGIONS.get(script or "hans", "CN")
    return f"{language}_{region}" if region else language


def template_language_for(locale: str, *, approved: Sequence[str], default: str) -> str:
    """The approved language to send a template in for `locale`.

    The exact language and region first; then the same language in another
    region (Meta's plain code, such as `pt`, before the first one listed; the
    same script for Chinese); else `default`. Without `approved`, `default`.
    """
    wanted = meta_language(locale)
    if not approved or not wanted:
        return default
    if wanted in approved:
        return wanted
    language = _language(wanted)
    same = [
        code
        for code in approved
        if _language(code) == language and _script(code) == _script(wanted)
    ]
    if language in same:
        return language
    return same[0] if same else default


def _language(code: str) -> str:
    return code.partition("_")[0]


def _script(code: str) -> str | None:
    language, _, region = code.partition("_")
    if language != "zh":
        return None
    return "Hant" if region in _TRADITIONAL_REGIONS else "Hans"
