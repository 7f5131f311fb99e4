"""The text of an OTP SMS, its language, and what it costs to send."""

from relay.sms.encoding import (
    Encoding,
    choose_encoding,
    encode_gsm7,
    is_gsm7,
    segment_count,
    septet_length,
)
from relay.sms.locales import (
    DEFAULT_LOCALE,
    MalformedLocale,
    is_valid_bcp47,
    normalize_locale,
    resolve_locale,
)
from relay.sms.templates import BUILT_IN_LOCALES
from relay.sms.text import render_sms, render_subject, sanitize_brand

__all__ = [
    "BUILT_IN_LOCALES",
    "DEFAULT_LOCALE",
    "Encoding",
    "MalformedLocale",
    "choose_encoding",
    "encode_gsm7",
    "is_gsm7",
    "is_valid_bcp47",
    "normalize_locale",
    "render_sms",
    "render_subject",
    "resolve_locale",
    "sanitize_brand",
    "segment_count",
    "septet_length",
]
