"""The words of an OTP SMS and of an email's subject, in the locale chosen for it.

The built-in wording per language is in `relay.sms.templates`; which locale a
message gets is `relay.sms.locales`' decision.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from relay.sms.encoding import is_gsm7, septet_length
from relay.sms.locales import resolve_locale
from relay.sms.templates import SMS_TEMPLATES, SUBJECT_TEMPLATES

BRAND_MAX_SEPTETS = 30

_CODE = re.compile(r"[A-Za-z0-9]+", re.ASCII)
_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})  # controls, bidi/zero-width, lone surrogates


# An account's brand is sanitized for every message it sends (twice: for the passcode
# and its text), a character at a time: kept per brand instead, as brands are few.
@functools.lru_cache(maxsize=1024)
def sanitize_brand(brand: str) -> str:
    """Brand as shown in the SMS: no controls, single spaces, at most 30 septets."""
    kept = "".join(" " if ch.isspace() else ch for ch in brand if _kept_in_brand(ch))
    return _truncate(" ".join(kept.split()), BRAND_MAX_SEPTETS).rstrip()


def render_sms(*, locale: str, brand: str, code: str, webotp_domain: str | None = None) -> str:
    """The SMS body; with `webotp_domain`, a last `@domain #code` line for WebOTP.

    The WebOTP line is always added when asked for, even when it makes the SMS
    take a second segment: without it the browser cannot read the code.
    """
    template = SMS_TEMPLATES[resolve_locale(locale)]
    return with_webotp_line(fill(template, brand=brand, code=code), code, webotp_domain)


def render_subject(*, locale: str, brand: str, code: str) -> str:
    """An email's subject line, in the template's language, ending with the code."""
    return fill(SUBJECT_TEMPLATES[resolve_locale(locale)], brand=brand, code=code)


def fill(template: str, *, brand: str, code: str, minutes: int | None = None) -> str:
    """`template` with its placeholders replaced; the brand is sanitized, the code checked."""
    shown_brand = sanitize_brand(brand)
    if not shown_brand:
        raise ValueError("brand is empty once sanitized")
    if _CODE.fullmatch(code) is None:
        raise ValueError("code must be ASCII letters and digits")
    # str.format reads the template once: braces in the brand stay verbatim.
    return template.format(brand=shown_brand, code=code, minutes=minutes)


def with_webotp_line(body: str, code: str, webotp_domain: str | None) -> str:
    if webotp_domain is None:
        return body
    return f"{body}\n@{_webotp_host(webotp_domain)} #{code}"


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
