"""The text of an OTP SMS and what it costs to send."""

from relay.sms.encoding import (
    Encoding,
    choose_encoding,
    encode_gsm7,
    is_gsm7,
    segment_count,
    septet_length,
)
from relay.sms.text import (
    SUPPORTED_LOCALES,
    UnsupportedLocale,
    is_valid_bcp47,
    render_sms,
    resolve_locale,
    sanitize_brand,
)

__all__ = [
    "SUPPORTED_LOCALES",
    "Encoding",
    "UnsupportedLocale",
    "choose_encoding",
    "encode_gsm7",
    "is_gsm7",
    "is_valid_bcp47",
    "render_sms",
    "resolve_locale",
    "sanitize_brand",
    "segment_count",
    "septet_length",
]
