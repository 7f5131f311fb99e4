"""The words of an OTP SMS, per language.

Every template stays inside the GSM-7 alphabet: a single accent outside it
(ó, ç, ã...) switches the whole SMS to UCS-2, whose 70-unit segments would
make most codes cost two segments instead of one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from types import MappingProxyType

from relay.sms.encoding import is_gsm7, septet_length

SUPPORTED_LOCALES: tuple[str, ...] = ("en", "es", "fr", "de", "pt")
DEFAULT_LOCALE = "en"
BRAND_MAX_SEPTETS = 30

_TEMPLATES: Mapping[str, str] = MappingProxyType(
    {
        "en": "Your {brand} verification code is {code}. Do not share it.",
        "es": "Tu clave de seguridad de {brand} es {code}. No la compartas con nadie.",
        "fr": "Votre code de vérification {brand} est {code}. Ne le partagez avec personne.",
        "de": "Ihr Bestätigungscode für {brand} lautet {code}. Geben Sie ihn nicht weiter.",
        # "código", "verificação" and "não" are not GSM-7; "token" is the common
        # Brazilian word for a one-time code and keeps the SMS at one segment.
        "pt": "Seu token {brand} é {code}. Nunca o compartilhe com ninguém.",
    }
)

# An email's subject: the code last, so that a notification's first line shows it.
_SUBJECTS: Mapping[str, str] = MappingProxyType(
    {
        "en": "Your {brand} verification code: {code}",
        "es": "Tu clave de seguridad de {brand}: {code}",
        "fr": "Votre code de vérification {brand} : {code}",
        "de": "Ihr Bestätigungscode für {brand}: {code}",
        "pt": "Seu código de verificação {brand}: {code}",
    }
)

# Language, then optional script and region: enough for the tags clients send.
_BCP47 = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?", re.ASCII)
_CODE = re.compile(r"[A-Za-z0-9]+", re.ASCII)
_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})  # controls, bidi/zero-width, lone surrogates


class UnsupportedLocale(ValueError):
    """The tag is not BCP 47, or names a language Relay has no text for."""

    def __init__(self, tag: str, reason: str) -> None:
        super().__init__(f"{reason}: {tag!r}")
        self.tag = tag


def is_valid_bcp47(tag: str) -> bool:
    """Syntax check: 2-3 letter language, optional 4-letter script, optional region."""
    return _BCP47.fullmatch(tag) is not None


def resolve_locale(tag: str) -> str:
    """The supported language for a tag: `pt-BR` -> `pt`, `fr_CA` -> `fr`."""
    normalized = tag.strip().replace("_", "-")
    if not is_valid_bcp47(normalized):
        raise UnsupportedLocale(tag, "not a BCP 47 language tag")
    language = normalized.split("-", 1)[0].lower()
    if language not in SUPPORTED_LOCALES:
        raise UnsupportedLocale(tag, "unsupported language")
    return language


def sanitize_brand(brand: str) -> str:
    """Brand as shown in the SMS: no controls, single spaces, at most 30 septets."""
    kept = "".join(" " if ch.isspace() else ch for ch in brand if _kept_in_brand(ch))
    return _truncate(" ".join(kept.split()), BRAND_MAX_SEPTETS).rstrip()


def render_sms(*, locale: str, brand: str, code: str, webotp_domain: str | None = None) -> str:
    """The SMS body; with `webotp_domain`, a last `@domain #code` line for WebOTP."""
    shown_brand = sanitize_brand(brand)
    if not shown_brand:
        raise ValueError("brand is empty once sanitized")
    if _CODE.fullmatch(code) is None:
        raise ValueError("code must be ASCII letters and digits")
    body = _TEMPLATES[resolve_locale(locale)].format(brand=shown_brand, code=code)
    if webotp_domain is None:
        return body
    return f"{body}\n@{_webotp_host(webotp_domain)} #{code}"


def render_subject(*, locale: str, brand: str, code: str) -> str:
    """An email's subject line, in the template's language, ending with the code."""
    shown_brand = sanitize_brand(brand)
    if not shown_brand:
        raise ValueError("brand is empty once sanitized")
    if _CODE.fullmatch(code) is None:
        raise ValueError("code must be ASCII letters and digits")
    return _SUBJECTS[resolve_locale(locale)].format(brand=shown_brand, code=code)


def _kept_in_brand(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) not in _REMOVED_CATEGORIES


def _truncate(text: str, max_septets: int) -> str:
    used = 0
    for index, ch in enumerate(text):
        # Extension characters (€, [ ...) cost two septets; that is what the
        # one-segment guarantee is about. Non-GSM characters count as one.
        used += septet_length(ch) if is_gsm7(ch) else 1
        if used > max_septets:
            return text[:index]
    return text


def _webotp_host(domain: str) -> str:
    host = domain.lower()
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"webotp_domain must be a bare hostname: {domain!r}")
    return host
